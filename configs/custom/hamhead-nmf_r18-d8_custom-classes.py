# Another class count (or other class names) for your dataset, in a child config: the decode
# head's num_classes and every dataloader's metainfo follow classes and palette here. The palette
# keeps your copy's colours and adds one per added class. Setting `classes` alone changes nothing
# (your copy computed its head and dataloaders when it was read), and the tools refuse it in one
# line; from the command line, --cfg-options classes=... palette=... on your copy does it all.
# Inherit your copy of the template instead of the template.
_base_ = ["./hamhead-nmf_r18-d8_custom.py"]
classes = ("background", "cat", "dog", "bird")  # EDIT: index i = label value i
palette = _base_.palette + [[40, 170, 60]]  # EDIT: your copy's colours, then one per added class
model = dict(decode_head=dict(num_classes=len(classes)))
_metainfo = dict(classes=classes, palette=palette)
train_dataloader = dict(dataset=dict(metainfo=_metainfo))
val_dataloader = dict(dataset=dict(metainfo=_metainfo))
test_dataloader = val_dataloader
