"""shapes_ds: small pure-Python data structures."""

from .errors import CapacityError, IntervalError, MatrixError, ShapesError
from .heap import BoundedPriorityQueue, top_k
from .intervals import IntervalSet, gaps, intersect, merge_intervals, overlaps, total_length
from .lru import LRUCache, cached_map
from .matrix import determinant, identity, multiply, power, shape, trace, transpose
from .trie import Trie, autocomplete, longest_common_prefix

__version__ = "0.1.0"
