"""scikit-learn compatible classifiers over the models (``y = -1`` marks unlabelled points)."""
