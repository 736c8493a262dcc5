"""Model selection from per-fold statistics: the feature set and lambda of a model.

:func:`~streamridge.model_selection.choose.choose_model` is the one model
selection: an estimator's fit calls it on the forms of all folds, nested
cross-validation (:mod:`streamridge.model_selection.nested`) on the forms of the other folds of
every outer fold.  :mod:`~streamridge.model_selection.attributes` turns its
result into an estimator's fitted attributes.
"""

from __future__ import annotations

from streamridge.model_selection.choose import Choice, SelectionConfig, choose_model, config_of

__all__ = ["Choice", "SelectionConfig", "choose_model", "config_of"]
