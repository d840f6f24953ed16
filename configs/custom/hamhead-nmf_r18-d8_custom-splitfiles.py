# (The template takes this layout directly: set split_dir="splits", img_dir="images",
# ann_dir="masks" in your copy. This child does the same for a copy that keeps folder splits.)
# Your dataset in flat folders, its splits given by split files (docs/custom_dataset.md):
#   <data_root>/images/NAME.jpg, <data_root>/masks/NAME_mask.png (one folder for all images,
#   one for all label maps), <data_root>/splits/train.txt and val.txt (one NAME per line, no
#   suffix). The template reads one folder per split (data_prefix <img_dir>/train, .../val);
#   here every split reads the same folders and its split file picks the names. Suffixes stay
#   those of your copy of the template (img_suffix, seg_map_suffix = "_mask.png").
# Inherit your copy of the template instead of the template.
_base_ = ["./hamhead-nmf_r18-d8_custom.py"]
_folders = dict(img_path="images", seg_map_path="masks")  # EDIT: your two folders
train_dataloader = dict(dataset=dict(data_prefix=_folders, ann_file="splits/train.txt"))
val_dataloader = dict(dataset=dict(data_prefix=_folders, ann_file="splits/val.txt"))
test_dataloader = val_dataloader  # EDIT: ann_file="splits/test.txt" if you have one
