"""Every file thermonet writes goes through this package.

* :mod:`thermonet.io.atomic`: crash-safe writing (temporary file, fsync, rename, directory
  fsync), for text, JSON, bytes and HDF5.
* :mod:`thermonet.io.h5`: the header every thermonet HDF5 file carries (format, format version,
  thermonet version) and its check on open, with one-line errors.
* :mod:`thermonet.io.digest`: checksums of every dataset and root attribute, written with the
  file and checked on every read.
* :mod:`thermonet.io.jsonable`: JSON conversion of NumPy values and the UTC time stamp.
* :mod:`thermonet.io.checkpoint` and :mod:`thermonet.io.trace`: a run's ``checkpoint.h5`` and
  its ``trace/`` segments.
"""

from __future__ import annotations
