"""Exception hierarchy. Every message says what was received, what was expected and the fix."""

from __future__ import annotations


class ThermonetError(Exception):
    """Base class of every error thermonet raises on purpose."""


class ConfigError(ThermonetError):
    """A run configuration is invalid."""


class DataError(ThermonetError):
    """A data file is missing, truncated, corrupt or inconsistent."""


class ParameterFileError(ThermonetError):
    """A parameter-vector file cannot be used (unreadable, wrong length, non-finite)."""


class PluginError(ThermonetError):
    """A plugin cannot be found, loaded or used."""


class MissingPluginError(PluginError):
    """No plugin of that name is registered."""


class PluginLoadError(PluginError):
    """A plugin failed to import."""


class PluginTypeError(PluginError):
    """A plugin does not satisfy its role's contract."""


class AmbiguousPluginError(PluginError):
    """Two distributions register the same name."""


class CheckpointError(ThermonetError):
    """A checkpoint cannot be read or used."""


class CheckpointMismatchError(CheckpointError):
    """A checkpoint does not belong to this run configuration."""


class CheckpointFormatError(CheckpointError):
    """A file is not a thermonet checkpoint or has an unsupported format version."""


class IntegrityError(CheckpointError):
    """A checkpoint or trace file fails its integrity check: a checksum does not match, a trace
    segment is missing, truncated or belongs to another run."""


class ConvergenceError(ThermonetError):
    """An iterative procedure did not converge."""


class PlotError(ThermonetError):
    """A figure cannot be drawn or saved (unknown kind or format, unusable run or baseline)."""
