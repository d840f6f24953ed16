# A lab task's data (projects/context_lab/context_lab/tasks.py; generate it with
#   python -m projects.context_lab.context_lab.tasks rooms --out-dir data/context_rooms):
# Context Shapes' pipelines, loaders and metric on the task's folder (the same seven classes).
_base_ = ["../../../configs/_base_/datasets/context_shapes.py"]
custom_imports = dict(imports=["projects.context_lab.context_lab"], allow_failed_imports=False)
dataset_type = "ContextRoomsDataset"
data_root = "data/context_rooms"
train_dataloader = dict(dataset=dict(type=dataset_type, data_root=data_root))
val_dataloader = dict(dataset=dict(type=dataset_type, data_root=data_root))
test_dataloader = val_dataloader
