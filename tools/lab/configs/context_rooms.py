# Context Rooms: the generated lab task that needs one fact per room (docs/demo.md). Create it with
#   python tools/dataset_converters/generate_context_rooms.py
# Lab code, from a checkout only: the dataset class is tools/lab/analysis/context_rooms.py.
# Context Shapes' pipelines, loaders and metric on other images (the same seven classes).
_base_ = ["../../../configs/_base_/datasets/context_shapes.py"]
custom_imports = dict(imports=["tools.lab.analysis.context_rooms"], allow_failed_imports=False)
dataset_type = "ContextRoomsDataset"
data_root = "data/context_rooms"
train_dataloader = dict(dataset=dict(type=dataset_type, data_root=data_root))
val_dataloader = dict(dataset=dict(type=dataset_type, data_root=data_root))
test_dataloader = val_dataloader
