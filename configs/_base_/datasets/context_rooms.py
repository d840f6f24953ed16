# Context Rooms: the generated demo task that needs one fact per room (docs/demo.md). Create it with
#   python tools/dataset_converters/generate_context_rooms.py
# Context Shapes' pipelines, loaders and metric on other images (the same seven classes).
_base_ = ["./context_shapes.py"]
dataset_type = "ContextRoomsDataset"
data_root = "data/context_rooms"
train_dataloader = dict(dataset=dict(type=dataset_type, data_root=data_root))
val_dataloader = dict(dataset=dict(type=dataset_type, data_root=data_root))
test_dataloader = val_dataloader
