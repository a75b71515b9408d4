"""The paper's preprocessing, exactly: Pillow bilinear 28x28 -> 16x16 (uint8), /255, normalise.

The original code (torchvision) did ``Resize((16, 16))`` -> ``ToTensor()`` ->
``Normalize((0.1307,), (0.3081,))`` on each PIL 'L' image. Pillow's bilinear filter is
antialiased when downscaling and returns *rounded uint8*; that rounding changes the inputs
measurably (Baldock & Marzari's released code), so the resize step is kept separate and exact.
"""

from __future__ import annotations

import numpy as np

from thermonet.errors import DataError

SIDE = 16
N_INPUTS = SIDE * SIDE
MEAN = 0.1307
STD = 0.3081
#: the value range of :func:`normalise`: pixel 0 and pixel 255
X_MIN = (0.0 - MEAN) / STD
X_MAX = (1.0 - MEAN) / STD

PREPROCESSING: dict[str, object] = {
    "resize": "PIL.Image.fromarray(uint8 28x28, mode 'L').resize((16, 16), "
              "Image.Resampling.BILINEAR) -> uint8 (antialiased, rounded)",
    "scale": "x / 255",
    "normalise": "(x - 0.1307) / 0.3081",
    "mean": MEAN,
    "std": STD,
    "layout": "row-major, index = row * 16 + col",
    "dtype": "float64",
}


def pillow_version() -> str:
    """The installed Pillow version (the resize may round differently across versions)."""
    import PIL

    return str(PIL.__version__)


def resize16(images: np.ndarray) -> np.ndarray:
    """Resize 28x28 uint8 images to 16x16 exactly as the paper's code did.

    Parameters
    ----------
    images : ndarray of uint8, shape (n, 28, 28)

    Returns
    -------
    ndarray of uint8, shape (n, 16, 16)
        ``PIL.Image.fromarray(img).resize((16, 16), Image.Resampling.BILINEAR)`` for each image
        (mode 'L'; Pillow's bilinear filter is antialiased and rounds to uint8).
    """
    images = np.asarray(images)
    if images.dtype != np.uint8 or images.ndim != 3 or images.shape[1:] != (28, 28):
        raise DataError(f"resize16 got an array of {images.dtype} with shape {images.shape}; "
                        f"expected uint8 images of shape (n, 28, 28)")
    out = np.empty((images.shape[0], SIDE, SIDE), dtype=np.uint8)
    from PIL import Image  # here, not at import: only resizing needs Pillow

    bilinear = Image.Resampling.BILINEAR
    for i, img in enumerate(np.ascontiguousarray(images)):
        pil = Image.fromarray(img)  # uint8 2-D -> mode 'L'
        out[i] = np.asarray(pil.resize((SIDE, SIDE), bilinear))
    return out


def normalise(images16: np.ndarray, dtype: type = np.float64) -> np.ndarray:
    """Scale to [0, 1] and normalise with the MNIST constants, flattened row-major.

    Parameters
    ----------
    images16 : ndarray of uint8, shape (n, 16, 16) or (n, 256)
    dtype : np.float64 (default) or np.float32
        float64 computes in float64 (what :class:`Dataset` holds). float32 repeats torchvision's
        float32 arithmetic step by step (``v / 255``, ``- 0.1307``, ``/ 0.3081``, each rounded to
        float32), which differs from casting the float64 result by up to 13 ulp.

    Returns
    -------
    ndarray of ``dtype``, shape (n, 256), C-contiguous
        ``(v / 255 - 0.1307) / 0.3081``; values in ``[-0.42421296, 2.8214867]``.
    """
    images16 = np.asarray(images16)
    if images16.dtype != np.uint8 or images16.ndim not in (2, 3) or \
            int(np.prod(images16.shape[1:])) != N_INPUTS:
        raise DataError(f"normalise got an array of {images16.dtype} with shape "
                        f"{images16.shape}; expected uint8 of shape (n, 16, 16) or (n, 256)")
    dt = np.dtype(dtype)
    if dt not in (np.dtype(np.float64), np.dtype(np.float32)):
        raise DataError(f"normalise got dtype={dt}; expected float64 or float32")
    x = images16.reshape(images16.shape[0], N_INPUTS).astype(dt)
    x /= dt.type(255.0)
    x -= dt.type(MEAN)
    x /= dt.type(STD)
    return x


def preprocess(images: np.ndarray) -> np.ndarray:
    """``normalise(resize16(images))``: uint8 (n, 28, 28) -> float64 (n, 256)."""
    return normalise(resize16(images))
