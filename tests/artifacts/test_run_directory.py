"""Variant names leave out the paper's settings, which are the schemas' defaults."""

from agents.settings import AgentSettings
from artifacts.run_directory import (
    DEFAULT_EVICTION,
    DEFAULT_PRIORITY_SIGNAL,
    DEFAULT_TARGET_RULE,
    variant_name,
)
from replay.settings import ReplaySettings


def test_the_settings_a_variant_name_leaves_out_are_the_schemas_defaults():
    assert (DEFAULT_TARGET_RULE, DEFAULT_PRIORITY_SIGNAL, DEFAULT_EVICTION, False) == (
        AgentSettings.target_rule,
        ReplaySettings.priority_signal,
        ReplaySettings.eviction,
        AgentSettings.keep_maximum_step,
    )
    assert variant_name("proportional") == "proportional"
