"""MNIST data for thermonet: the paper's training sets, test sets and preprocessing.

Works offline out of the box on the paper's D50, D500 and D5000 and the official 10,000-image
test set (shipped in ``embedded/mnist16.h5``). Everything else (other sizes, the paper's D1000
and D50000, the "complement" test set) needs the four original MNIST IDX files, found through
``mnist_dir=``, ``$THERMONET_MNIST_DIR`` or ``<data dir>/mnist`` (``thermonet data fetch``).

::

    from thermonet.data import load_data
    split = load_data("D500")             # test="auto": complement if full MNIST is found
    split.train.x.shape, split.test_kind  # (500, 256), "complement" or "official"

See docs/data.md for the preprocessing, names, storage and provenance.
"""

from __future__ import annotations

from thermonet.data._cases import column_names, read_cases
from thermonet.data._datasets import (
    INDEX_ENCODING,
    OFFICIAL_TEST_NAME,
    TEST_INDEX_OFFSET,
    TEST_KINDS,
    Dataset,
    DataSplit,
    data_info,
    load_data,
    load_dataset,
    make_subset,
    official_fallback_note,
    official_test,
    robot_arm_split,
)
from thermonet.data._embedded import BUILD_COMMAND, EMBEDDED_PATH, build_embedded, read_embedded
from thermonet.data._embedded import clear_cache as clear_embedded_cache
from thermonet.data._fetch import DEFAULT_MIRRORS, fetch_mnist
from thermonet.data._mnist import (
    DATA_ENV,
    MNIST_ENV,
    MNIST_FILES,
    N_TRAIN,
    MnistNotFoundError,
    data_dir_path,
    find_mnist,
    mnist16,
    mnist_dir_path,
    read_idx,
)
from thermonet.data._mnist import clear_cache as clear_mnist_cache
from thermonet.data._preprocess import MEAN, STD, X_MAX, X_MIN, normalise, preprocess, resize16
from thermonet.data._robot_arm import LARGE_TEST_COLUMNS as ROBOT_ARM_LARGE_TEST_COLUMNS
from thermonet.data._robot_arm import LARGE_TEST_SEED as ROBOT_ARM_LARGE_TEST_SEED
from thermonet.data._robot_arm import ROBOT_ARM_PATH
from thermonet.data._robot_arm import arm as robot_arm_function
from thermonet.data._robot_arm import generate as generate_robot_arm
from thermonet.data._robot_arm import large_test as robot_arm_large_test
from thermonet.data._robot_arm import read as read_robot_arm
from thermonet.data._robot_arm import write as write_robot_arm
from thermonet.data._robot_arm import write_large_test as write_robot_arm_large_test
from thermonet.data._subsets import (
    EMBEDDED_SUBSETS,
    PAPER_SUBSETS,
    parse_name,
    read_paper_subset,
    stratified_indices,
    subsets_dir,
)
from thermonet.data._user import (
    FILE_SUFFIXES,
    file_sha256,
    load_configured,
    load_file_split,
    to_original_units,
)

__all__ = [
    "BUILD_COMMAND",
    "DATA_ENV",
    "DEFAULT_MIRRORS",
    "EMBEDDED_PATH",
    "EMBEDDED_SUBSETS",
    "FILE_SUFFIXES",
    "INDEX_ENCODING",
    "MEAN",
    "MNIST_ENV",
    "MNIST_FILES",
    "N_TRAIN",
    "OFFICIAL_TEST_NAME",
    "PAPER_SUBSETS",
    "ROBOT_ARM_LARGE_TEST_COLUMNS",
    "ROBOT_ARM_LARGE_TEST_SEED",
    "ROBOT_ARM_PATH",
    "STD",
    "TEST_INDEX_OFFSET",
    "TEST_KINDS",
    "X_MAX",
    "X_MIN",
    "DataSplit",
    "Dataset",
    "MnistNotFoundError",
    "build_embedded",
    "clear_caches",
    "column_names",
    "data_dir_path",
    "data_info",
    "fetch_mnist",
    "file_sha256",
    "find_mnist",
    "generate_robot_arm",
    "load_configured",
    "load_data",
    "load_dataset",
    "load_file_split",
    "make_subset",
    "mnist16",
    "mnist_dir_path",
    "normalise",
    "official_fallback_note",
    "official_test",
    "parse_name",
    "preprocess",
    "read_cases",
    "read_embedded",
    "read_idx",
    "read_paper_subset",
    "read_robot_arm",
    "resize16",
    "robot_arm_function",
    "robot_arm_large_test",
    "robot_arm_split",
    "stratified_indices",
    "subsets_dir",
    "to_original_units",
    "write_robot_arm",
    "write_robot_arm_large_test",
]


def clear_caches() -> None:
    """Forget in-memory copies (checksums, resized MNIST, embedded arrays); files are untouched."""
    clear_mnist_cache()
    clear_embedded_cache()
