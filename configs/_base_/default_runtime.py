# Runtime shared by every hamseg config: registers hamseg, logs to TensorBoard, draws predictions.
custom_imports = dict(imports=["hamseg"], allow_failed_imports=False)
default_scope = "mmseg"
env_cfg = dict(
    cudnn_benchmark=True,
    mp_cfg=dict(mp_start_method="fork", opencv_num_threads=0),
    dist_cfg=dict(backend="nccl"),
)
vis_backends = [dict(type="LocalVisBackend"), dict(type="TensorboardVisBackend")]
visualizer = dict(type="SegLocalVisualizer", vis_backends=vis_backends, name="visualizer")
log_processor = dict(by_epoch=False)
log_level = "INFO"
load_from = None
resume = False
tta_model = dict(type="SegTTAModel")
# channels_last weights on CUDA (1.2-1.35x faster iterations, docs/gpu.md); a no-op on the CPU
custom_hooks = [dict(type="mmseg.ChannelsLastHook")]
