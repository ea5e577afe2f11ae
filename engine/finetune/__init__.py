"""Starting a run from a trained model (``train.init``): the source's weights, the load plan, freezing."""
