"""Presets: the primitive per phase of the systems DrTM+H compares (its Table 4).

===========  =======================  ===========  ====  ==========  =======  ===========
system       E (execution)            V (lock +    L     C           RO: R/V  options
                                      validate)
===========  =======================  ===========  ====  ==========  =======  ===========
FaRM         I (no location cache)    II + I       I     II          I / I    -
DrTM+R       I (location cache)       I + I        I     I + I       I / I    -
FaSST        II, locks in execution   II           II    II          II / II  FaSST OCC
DrTM+H       I on cache hit, else II  I + I        I     I           I/II / I passive ACK
hybrid-FaSST FaSST with one-sided validation and logging (DrTM+H fig. 13d)
DrTM+H       as DrTM+H, but II + I    II + I       I     II          I/II / I passive ACK
(rpc-lock)   validation and II commit
===========  =======================  ===========  ====  ==========  =======  ===========

``drtmh-rpc-lock`` is DrTM+H's own rule (its sec. 6.1) for NICs whose atomics are slow
or cannot be mixed with local CPU atomics: "Otherwise two-sided is preferred" for locking,
and commit then uses RPC too ("DrTM+H uses one-sided WRITES to commit if one-sided ATOMIC is
used in the validation phase. Otherwise DrTM+H uses two-sided RPC"); logging stays one-sided.

All presets use coroutines, outstanding requests in validation, logging and commit, and
doorbell batching of RPCs (DrTM+H sec. 6.3: "all existing optimizations ... are
enabled"). Passive ACK and outstanding requests in the execution phase (speculative
execution: the independent reads of a transaction go out together, sec. 6.1) are
DrTM+H's own; the prior designs fetch a transaction's records one at a time.
FaSST logs to the coordinator's backups (DrTM+H's ``EM_FASST`` emulation); the others to
the backups of every written node and of the coordinator.
"""
from __future__ import annotations

from dataclasses import fields, replace

from .occ import OccConfig

PRESETS: dict[str, OccConfig] = {
    "drtmh": OccConfig(execution="hybrid", index_cache=True, lock="one_sided",
                       validate="one_sided", log="one_sided", commit="one_sided",
                       ro_read="hybrid", ro_validate="one_sided", passive_ack=True),
    "drtmh-rpc-lock": OccConfig(execution="hybrid", index_cache=True, lock="two_sided",
                                validate="one_sided", log="one_sided", commit="two_sided",
                                ro_read="hybrid", ro_validate="one_sided", passive_ack=True),
    "farm": OccConfig(
        outstanding=False, execution="one_sided", index_cache=False, lock="two_sided",
                      validate="one_sided", log="one_sided", commit="two_sided",
                      ro_read="one_sided", ro_validate="one_sided", passive_ack=False),
    "drtmr": OccConfig(
        outstanding=False, execution="one_sided", index_cache=True, lock="one_sided",
                       validate="one_sided", log="one_sided", commit="one_sided",
                       ro_read="one_sided", ro_validate="one_sided", passive_ack=False),
    "fasst": OccConfig(
        outstanding=False, execution="two_sided", index_cache=False, lock="two_sided",
                       validate="two_sided", log="two_sided", commit="two_sided",
                       ro_read="two_sided", ro_validate="two_sided", passive_ack=False,
                       lock_in_execution=True, log_to="coordinator"),
    "hybrid-fasst": OccConfig(
        outstanding=False, execution="two_sided", index_cache=False, lock="two_sided",
                              validate="one_sided", log="one_sided", commit="two_sided",
                              ro_read="two_sided", ro_validate="one_sided",
                              passive_ack=False, lock_in_execution=True,
                              log_to="coordinator"),
}


def preset(name: str, **overrides) -> OccConfig:
    """The configuration of system ``name`` with ``overrides`` (fields of OccConfig)."""
    if name not in PRESETS:
        raise ValueError(f"preset: one of {', '.join(PRESETS)}, not {name!r}")
    unknown = sorted(set(overrides) - {f.name for f in fields(OccConfig)})
    if unknown:
        raise ValueError(f"preset {name!r}: unknown OccConfig field(s) "
                         f"{', '.join(unknown)}; expected some of "
                         f"{', '.join(f.name for f in fields(OccConfig))}")
    return replace(PRESETS[name], **overrides)
