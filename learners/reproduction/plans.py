"""The plans `python -m learners.reproduce` knows: a paper's table (or figure), the methods and
benchmarks it covers, and the function that turns a request into stages and report rows."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from learners.reproduction import plan_atg, plan_dhillon, plan_meta_dataset
from learners.reproduction.plan_parts import PlanRequest, PlanSpec

__all__ = ["Plan", "PLANS"]


@dataclass(frozen=True)
class Plan:
    name: str
    about: str
    methods: tuple[str, ...]
    default_methods: tuple[str, ...]  # empty: --method must be given
    benchmarks: tuple[str, ...]  # datasets it trains on separately (--benchmark); may be empty
    recipes: tuple[str, ...]  # the learners.train recipes its stages name
    build: Callable[[PlanRequest], PlanSpec]


def _meta_dataset_recipes() -> tuple[str, ...]:
    methods = plan_meta_dataset.METHODS.values()
    pre = {m.pretraining.recipe for m in methods if m.pretraining}
    return tuple(sorted(pre | {m.recipe for m in methods}))


PLANS: dict[str, Plan] = {
    plan.name: plan
    for plan in (
        Plan(
            plan_meta_dataset.PLAN,
            "Meta-Dataset Table 1 (top): trained on ILSVRC-2012 only, 10 test sources",
            tuple(plan_meta_dataset.METHODS),
            (),
            (),
            _meta_dataset_recipes(),
            plan_meta_dataset.build,
        ),
        Plan(
            plan_dhillon.PLAN,
            "Dhillon et al. Table 1: Mini-ImageNet and CIFAR-FS, (train) and (train + val), "
            "1- and 5-shot",
            tuple(plan_dhillon.METHODS),
            plan_dhillon.DEFAULT_METHODS,
            tuple(plan_dhillon.BENCHMARKS),
            (plan_dhillon.RECIPE,),
            plan_dhillon.build,
        ),
        Plan(
            plan_atg.PLAN,
            "ATG Figure 2: Multiclass accuracy against the divergence D of the taskset",
            ("multiclass",),
            ("multiclass",),
            tuple(plan_atg.DATASETS),
            (plan_atg.RECIPE,),
            plan_atg.build,
        ),
    )
}
