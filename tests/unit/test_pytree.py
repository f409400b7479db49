"""mtensor.pytree over optree: round trips of every container kind the callers meet, None as a
leaf, user containers, and the hashable signature ``structure`` gives mt.compile (no MPI)."""
from collections import OrderedDict, namedtuple

import optree
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mtensor.pytree import NAMESPACE, flatten, structure

Point = namedtuple("Point", "x y")


class Pair:
    """A user container that mtensor only walks into once registered."""

    def __init__(self, left, right):
        self.left, self.right = left, right

    def __eq__(self, other):
        return type(other) is Pair and (self.left, self.right) == (other.left, other.right)


optree.register_pytree_node(Pair, lambda p: ((p.left, p.right), None, None),
                            lambda _, children: Pair(*children), namespace=NAMESPACE)


def _key(leaf):
    return type(leaf), leaf


def _relabelled(tree):
    """``tree``'s leaves, and the tree rebuilt from new leaves 0, 1, 2, ... (so a test sees
    which leaf went where)."""
    leaves, rebuild = flatten(tree)
    return leaves, rebuild(list(range(len(leaves))))


trees = st.recursive(
    st.integers() | st.text(max_size=3) | st.none(),
    lambda kids: (st.lists(kids, max_size=3) | st.tuples(kids, kids)
                  | st.dictionaries(st.text(max_size=3), kids, max_size=3)),
    max_leaves=12)


@given(trees)
def test_nested_dicts_lists_tuples_round_trip(tree):
    leaves, rebuild = flatten(tree)
    assert rebuild(leaves) == tree
    assert type(rebuild(leaves)) is type(tree)


def test_leaves_follow_sorted_keys_and_rebuild_restores_key_order():
    leaves, rebuilt = _relabelled({"b": [1, (2, 3)], "a": 4})
    assert leaves == [4, 1, 2, 3]
    assert rebuilt == {"b": [1, (2, 3)], "a": 0}
    assert list(rebuilt) == ["b", "a"]
    assert type(rebuilt["b"][1]) is tuple


def test_namedtuple_rebuilds_as_itself():
    leaves, rebuilt = _relabelled(Point(x=7, y=[8, 9]))
    assert leaves == [7, 8, 9]
    assert type(rebuilt) is Point and rebuilt == Point(0, [1, 2])


def test_ordered_dict_keeps_insertion_order():
    leaves, rebuilt = _relabelled(OrderedDict([("z", 1), ("a", 2)]))
    assert leaves == [1, 2]
    assert type(rebuilt) is OrderedDict and list(rebuilt.items()) == [("z", 0), ("a", 1)]


def test_none_is_a_leaf():
    leaves, rebuild = flatten([None, {"g": None}, 3])
    assert leaves == [None, None, 3]
    assert rebuild(["p", "q", "r"]) == ["p", {"g": "q"}, "r"]
    assert flatten(None)[0] == [None]


def test_registered_container_is_walked_into():
    leaves, rebuilt = _relabelled(Pair([5], {"k": 6}))
    assert leaves == [5, 6]
    assert rebuilt == Pair([0], {"k": 1})


def test_unregistered_container_is_a_leaf():
    class Opaque:
        pass

    thing = Opaque()
    assert flatten([thing])[0] == [thing]


def test_mixed_type_keys_sort_by_type_then_key():
    tree = {"x": "s", 2: "two", 1: "one"}
    leaves, rebuilt = _relabelled(tree)
    assert leaves == ["one", "two", "s"]
    assert rebuilt == {"x": 2, 2: 1, 1: 0} and list(rebuilt) == ["x", 2, 1]


def test_rebuild_rejects_the_wrong_number_of_leaves():
    _, rebuild = flatten([1, 2])
    with pytest.raises(ValueError):
        rebuild([1])


def test_structure_equal_for_equal_trees_and_hashable():
    one = structure(({"a": [1, None]}, Point(2, "s")), _key)
    two = structure(({"a": [1, None]}, Point(2, "s")), _key)
    assert one == two and hash(one) == hash(two)
    assert {one: "trace"}[two] == "trace"


def test_structure_ignores_dict_insertion_order():
    assert structure({"a": 1, "b": 2}, _key) == structure({"b": 2, "a": 1}, _key)


@pytest.mark.parametrize("other", [
    ({"a": [1, None]}, Point(3, "s")),         # a leaf's value, so its key
    ({"a": [1.0, None]}, Point(2, "s")),       # a leaf's type, so its key
    ({"a": (1, None)}, Point(2, "s")),         # list -> tuple
    ({"a": [1, None]}, (2, "s")),              # namedtuple -> tuple
    (OrderedDict(a=[1, None]), Point(2, "s")),  # dict -> OrderedDict
    ({"b": [1, None]}, Point(2, "s")),         # a dict key
    ({"a": [1]}, Point(2, "s")),               # a None leaf dropped
])
def test_structure_differs_when_a_leaf_key_or_a_container_differs(other):
    base = structure(({"a": [1, None]}, Point(2, "s")), _key)
    assert structure(other, _key) != base


def test_structure_sees_leaf_keys_not_leaves():
    assert structure([1, 2], lambda leaf: "same") == structure([3, 4], lambda leaf: "same")
    assert structure([1, 2], lambda leaf: "same") != structure([1, 2], lambda leaf: leaf)
