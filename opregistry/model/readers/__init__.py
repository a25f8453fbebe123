"""Model readers. Static readers (SavedModel, GraphDef) parse files with the minimal
schema in ``schema`` and never import TensorFlow or run model code."""
