# SegNeXt-L (MSCAN-L) on ADE20K: mmseg's own recipe (segnext_mscan-l_1xb16-adamw-160k_ade20k-512x512.py)
# with the decode head switched to hamseg's HamLightHead (mmseg's structure and parameter names:
# mmseg's checkpoints load strictly). mmseg's ham_kwargs (NMF, r = 16, 6 train / 7 eval steps) map
# to hamseg's NMF with the paper's one-step gradient, evaluated as mmseg evaluates (a new
# dictionary at every forward). Overrides: --cfg-options model.decode_head.ham_kwargs.MD_R=32, or
# model.decode_head.ham_cfg.eval_seed=0 model.decode_head.ham_cfg.eval_draws=12. docs/segnext.md.
_base_ = ["mmseg::segnext/segnext_mscan-l_1xb16-adamw-160k_ade20k-512x512.py"]
custom_imports = dict(imports=["hamseg"], allow_failed_imports=False)
model = dict(decode_head=dict(type="HamLightHead"))
