# HamNet as the authors released it for PASCAL VOC (Gsunshine/Enjoy-Hamburger, seg/HamNet, "V2"):
# - backbone: ResNet-101 with the deep stem 3x3 convs 3->64->64->128 (ResNetV1c, stem_channels=128),
#   output stride 8: layer3 stride 1 dilation 2 (first block 1), layer4 stride 1 with block dilations
#   2, 8, 16; ImageNet weights resnet101-2a57e44d.pth of the release (docs/recipes.md);
# - head: 3x3 conv-BN-ReLU 2048->512, Hamburger V2 (NMF, d=512, r=64, K=6 train and eval, one-step
#   gradient, random init), 3x3 conv-BN-ReLU 512->256, Dropout2d(0.1), 1x1 classifier, bilinear
#   up-sampling with align_corners=True; no auxiliary head; only the Hamburger sets its own init,
#   the other convs keep PyTorch's default (conv_init="pytorch");
# - synchronized BN everywhere with momentum 3e-4 (PyTorch convention), as the release.
norm_cfg = dict(type="SyncBN", requires_grad=True, momentum=3e-4)
data_preprocessor = dict(
    type="SegDataPreProcessor",
    mean=[123.675, 116.28, 103.53],  # ImageNet mean/std of the release, RGB
    std=[58.395, 57.12, 57.375],
    bgr_to_rgb=True,
    pad_val=0,  # padding after normalisation, as the release
    seg_pad_val=255,
)
model = dict(
    type="EncoderDecoder",
    data_preprocessor=data_preprocessor,
    pretrained=None,
    backbone=dict(
        type="ResNetV1c",
        depth=101,
        stem_channels=128,
        num_stages=4,
        out_indices=(0, 1, 2, 3),
        strides=(1, 2, 1, 1),
        dilations=(1, 1, 2, 4),
        multi_grid=(2, 8, 16),
        contract_dilation=True,
        norm_cfg=norm_cfg,
        norm_eval=False,
        style="pytorch",
        init_cfg=dict(
            type="HamResNetPretrained", checkpoint="data/pretrained/resnet101-2a57e44d.pth"
        ),
    ),
    decode_head=dict(
        type="HamHead",
        in_channels=2048,
        in_index=3,
        ham_channels=512,
        channels=256,
        ham_cfg=dict(
            type="NMF",
            S=1,
            R=64,
            train_steps=6,
            eval_steps=6,
            inv_t=1,
            init="random",
            grad="one_step",
            # evaluation: the paper's protocol, a new dictionary for every image at every forward
            # (the release's RAND_INIT; docs/recipes.md, "Testing"); hamseg's deterministic
            # ensemble: eval_seed=0, eval_draws=12 (docs/evaluation.md)
            eval_seed=None,
            eval_draws=1,
        ),
        variant="release",
        conv_init="pytorch",
        dropout_ratio=0.1,
        num_classes=21,
        norm_cfg=norm_cfg,
        align_corners=True,
        # The release averages the per-pixel NLL over all pixels, ignored ones counting 0:
        # mmseg's avg_non_ignore=False.
        loss_decode=dict(type="CrossEntropyLoss", use_sigmoid=False, loss_weight=1.0),
    ),
    train_cfg=dict(),
    test_cfg=dict(mode="whole"),
)
# Multi-process runs convert every norm layer to torch's SyncBatchNorm (on CPU-only machines
# hamseg swaps in its gloo-capable HamSyncBN, see hamseg.models.cpu_sync_bn).
sync_bn = "torch"
# tools/test.py --tta: leaf configs set tta_model = dict(type="HamSegTTAModel", ...) (the
# runtime base already defines tta_model, and mmengine forbids a key in two bases).
