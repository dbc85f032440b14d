"""Matrices as lists of lists of numbers."""

from . import validate
from .errors import MatrixError


def shape(matrix):
    """Return ``(rows, columns)``; raise ``MatrixError`` for ragged rows.

    >>> shape([[1, 2, 3], [4, 5, 6]])
    (2, 3)
    >>> shape([])
    (0, 0)
    """
    if not matrix:
        return (0, 0)
    width = len(matrix[0])
    for index, row in enumerate(matrix):
        if len(row) != width:
            raise MatrixError(f"row {index} has {len(row)} columns, expected {width}")
    return (len(matrix), width)


def zeros(rows, columns):
    """A ``rows`` x ``columns`` matrix of zeros."""
    validate.require_non_negative(rows, "rows")
    validate.require_non_negative(columns, "columns")
    return [[0] * columns for _ in range(rows)]


def identity(size):
    """The ``size`` x ``size`` identity matrix.

    >>> identity(3)
    [[1, 0, 0], [0, 1, 0], [0, 0, 1]]
    """
    result = zeros(size, size)
    for i in range(size):
        result[i][i] = 1
    return result


def transpose(matrix):
    """Swap rows and columns.

    >>> transpose([[1, 2, 3], [4, 5, 6]])
    [[1, 4], [2, 5], [3, 6]]
    """
    rows, columns = shape(matrix)
    return [[matrix[r][c] for r in range(rows)] for c in range(columns)]


def add(a, b):
    """Element-wise sum of two matrices of the same shape."""
    if shape(a) != shape(b):
        raise MatrixError(f"cannot add shapes {shape(a)} and {shape(b)}")
    return [[x + y for x, y in zip(row_a, row_b)] for row_a, row_b in zip(a, b)]


def scale(matrix, factor):
    """Multiply every element by ``factor``."""
    shape(matrix)
    return [[factor * value for value in row] for row in matrix]


def multiply(a, b):
    """Matrix product ``a @ b``.

    >>> multiply([[1, 2], [3, 4]], [[5], [6]])
    [[17], [39]]
    """
    a_rows, a_cols = shape(a)
    b_rows, b_cols = shape(b)
    if a_cols != b_rows:
        raise MatrixError(f"cannot multiply {a_rows}x{a_cols} by {b_rows}x{b_cols}")
    columns = transpose(b)
    return [[sum(x * y for x, y in zip(row, column)) for column in columns] for row in a]


def _require_square(matrix):
    rows, columns = shape(matrix)
    if rows != columns:
        raise MatrixError(f"expected a square matrix, got {rows}x{columns}")
    return rows


def trace(matrix):
    """Sum of the main diagonal of a square matrix."""
    size = _require_square(matrix)
    return sum(matrix[i][i] for i in range(size))


def determinant(matrix):
    """Determinant by fraction-free (Bareiss) elimination; exact for integers.

    >>> determinant([[2, 0, 1], [1, 3, 2], [1, 1, 2]])
    6
    >>> determinant([[1, 2], [2, 4]])
    0
    >>> determinant([[0, 1], [1, 0]])
    -1
    """
    size = _require_square(matrix)
    if size == 0:
        return 1
    a = [list(row) for row in matrix]
    exact = all(isinstance(value, int) for row in a for value in row)
    sign, previous = 1, 1
    for k in range(size - 1):
        if a[k][k] == 0:
            pivot = next((i for i in range(k + 1, size) if a[i][k] != 0), None)
            if pivot is None:
                sign = 0
                break
            a[k], a[pivot] = a[pivot], a[k]
            sign = -sign
        for i in range(k + 1, size):
            for j in range(k + 1, size):
                numerator = a[i][j] * a[k][k] - a[i][k] * a[k][j]
                a[i][j] = numerator // previous if exact else numerator / previous
        previous = a[k][k]
    return sign * a[size - 1][size - 1]


def power(matrix, exponent):
    """Raise a square matrix to a non-negative integer power by repeated squaring.

    >>> power([[1, 1], [1, 0]], 10)
    [[89, 55], [55, 34]]
    """
    validate.require_non_negative(exponent, "exponent")
    result = identity(_require_square(matrix))
    base = matrix
    while exponent:
        if exponent & 1:
            result = multiply(result, base)
        base = multiply(base, base)
        exponent >>= 1
    return result


def format_matrix(matrix, precision=2):
    """Render a matrix as right-aligned text columns."""
    shape(matrix)
    cells = [[f"{v:.{precision}f}" if isinstance(v, float) else str(v) for v in row] for row in matrix]
    widths = [max(len(cell) for cell in column) for column in zip(*cells)] if cells else []
    return "\n".join(" ".join(cell.rjust(w) for cell, w in zip(row, widths)) for row in cells)
