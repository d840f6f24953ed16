# Ablation base (paper Sec. 3.1, App. E.1): dilated ResNet-50 at output stride 16, batch 12 (one GPU
# in the paper), 30k iterations, lr 0.009 (poly 0.9), wd 1e-4, crop 513 on VOC trainaug, validated
# single-scale on VOC val. Hamburger as in the paper's Eq. 6 (variant 'paper', "V1": +0.50M
# parameters as in Table 2), NMF, d=512, r=64, K=6, one-step gradient, random init: the "NMF,
# one-step" cell of Table 1, 78.3(77.8). Every other file in this folder changes one setting.
# ResNet-50 as in the release's OS16 branch: deep stem (128), layer3 stride 2, layer4 dilation 2
# with block dilations 1, 4, 8; ImageNet weights resnet50-ebb6acbb.pth of the release.
# Sweeps and the paper's numbers: docs/recipes.md, "Ablations".
_base_ = [
    "../../_base_/models/hamnet_r101-d8.py",
    "../../_base_/datasets/voc12aug_hamnet.py",
    "../../_base_/schedules/hamnet_sgd_poly_30k.py",
    "../../_base_/default_runtime.py",
]
model = dict(
    data_preprocessor=dict(size=(513, 513)),
    backbone=dict(
        depth=50,
        strides=(1, 2, 2, 1),
        dilations=(1, 1, 1, 2),
        multi_grid=(1, 4, 8),
        init_cfg=dict(
            type="HamResNetPretrained", checkpoint="data/pretrained/resnet50-ebb6acbb.pth"
        ),
    ),
    decode_head=dict(variant="paper"),
)
train_dataloader = dict(batch_size=12)
tta_model = dict(type="HamSegTTAModel", merge="logits_sum", pad_stride=8)
# Seed 66 as the release, offset by the rank (mmengine: seed + rank) so that every GPU draws its
# own NMF dictionaries, as in the release (the weights still start equal on every rank: mmengine
# broadcasts rank 0's after init_weights). docs/recipes.md, "Seed".
randomness = dict(seed=66, diff_rank_seed=True)
