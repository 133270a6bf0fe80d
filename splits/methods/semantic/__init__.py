"""`--method semantic`: class splits from a hierarchy, superclasses or a DAG (`algorithm`,
`method`)."""

from __future__ import annotations

from episodes.util.lazy_names import lazy_names

__all__ = [
    "HierarchyError",
    "SemanticMethod",
    "SemanticParameters",
    "dag_split",
    "superclass_split",
]

__getattr__, __dir__ = lazy_names(
    __name__,
    {
        **dict.fromkeys(
            ("HierarchyError", "dag_split", "superclass_split"), "splits.methods.semantic.algorithm"
        ),
        **dict.fromkeys(("SemanticMethod", "SemanticParameters"), "splits.methods.semantic.method"),
    },
)
