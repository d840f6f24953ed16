# Another class count (or other class names) for your dataset, in a child config: the decode
# head's num_classes and every dataloader's metainfo. Setting `classes` alone changes nothing
# here (your copy computed its head and dataloaders when it was read), and the tools refuse it
# in one line. The checked label loader takes the head's class count.
# Inherit your copy of the template instead of the template.
_base_ = ["./hamhead-nmf_r18-d8_custom.py"]
classes = ("background", "cat", "dog", "bird")  # EDIT: index i = label value i
palette = [[0, 0, 0], [220, 40, 40], [40, 90, 220], [40, 170, 60]]  # EDIT: one colour per class
model = dict(decode_head=dict(num_classes=len(classes)))
_metainfo = dict(classes=classes, palette=palette)
train_dataloader = dict(dataset=dict(metainfo=_metainfo))
val_dataloader = dict(dataset=dict(metainfo=_metainfo))
test_dataloader = val_dataloader
