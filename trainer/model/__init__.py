"""The model in a graph: calling the model_fn, the graph per mode, the train op, the Scaffold, names, warm start."""
