"""The embedded engine's cost of a request: each expression text parsed once, not per request.

Layer: inside the embedded engine (``local.answer_quickly`` installs it), under moto's DynamoDB.
Why: the store sends a few expression texts again and again, with other values, and moto parsed
each one two or three times per request (its handler, its backend, again per transaction action),
then ran its whole-tree checks on the update expression once per request: a request of the store
cost the engine 2-4 times a short source-style ``UpdateItem``, and more the longer its
expressions. What is reused is only what the text alone decides; nothing about an item is:

* ``UpdateExpressionParser.make`` remembers its tree per text. moto's ``Validator`` deep-copies
  the tree before it substitutes placeholders, and everything else only reads it.
* A condition is parsed once per text into a template whose names and values are placeholders
  (the store's names change per request: they carry its request tokens); each request binds its
  own by rebuilding the template's operators with their constructors, so a check a constructor
  makes (``BETWEEN`` on a NULL bound) still runs.
* The update checks that depend on the text, the names and the table's key alone (one clause
  per kind, no overlapping paths, no key attribute changed) run once per text and *pattern* of
  names: which names are equal to each other, to a key attribute or to a word of the text (all
  those checks can see of them). The tree remembers the patterns that passed. The checks that
  need the item or the values run every time.
* moto's list of its own modules (read from disk on every request) is read once.
* A request's JSON is read along its shape by its keys (``parsing``); an item action's result
  is written to JSON directly (``results``); a transaction's condition is evaluated once
  (``transactions``); moto's backend is looked up once per request (``lookups``).

Every cache is bounded (``CACHE_SIZE`` texts); a text moto refuses is never cached (the refusal is
raised again, each time).
"""

from __future__ import annotations

import contextlib
import functools
import re
import weakref
from typing import Any

from . import lookups as engine_lookups
from . import parsing as engine_parsing
from . import results as engine_results
from . import transactions as engine_transactions
from . import updates as engine_updates
from .checks import placeholders

CACHE_SIZE = 1024
#: Conditions bound to a request's own maps, kept for the request's other parses of them.
BOUND_SIZE = 64
_PLACEHOLDER_TYPE = "sessionstore:placeholder"
#: Per cached update tree: the words of its text; the name patterns whose static checks passed.
_WORDS: weakref.WeakKeyDictionary[Any, frozenset[str]] = weakref.WeakKeyDictionary()
_PASSED: weakref.WeakKeyDictionary[Any, set[Any]] = weakref.WeakKeyDictionary()
#: isinstance answers of moto's tree walks, per class (its node classes never change).
_IS_NODE: dict[type, bool] = {}
_PROCESSED: dict[tuple[type, type], bool] = {}
#: The update checks of moto's that depend on the text, the names and the key alone.
_STATIC_CHECKS = (
    "ActionCountValidator",
    "OverlappingPathsValidator",
    "UpdateHashRangeKeyValidator",
)


def install() -> None:
    """Patch moto in this process (once: ``local``)."""
    _parse_updates_once()
    _parse_conditions_once()
    _check_update_texts_once()
    _traverse_cheaply()
    _list_modules_once()
    _request_ids_cheaply()
    engine_results.install()
    engine_parsing.install()
    engine_transactions.install()
    engine_lookups.install(CACHE_SIZE)


def _parse_updates_once() -> None:
    from moto.dynamodb.parsing import ast_nodes, expressions

    parser: Any = expressions.UpdateExpressionParser  # type: ignore[attr-defined]
    make = parser.make

    @functools.lru_cache(maxsize=CACHE_SIZE)
    def tree(text: str) -> Any:
        made = make(text)
        if _plain(made):  # nodes of children, type and parent only: copied by ``_clone``
            _WORDS[made] = frozenset(_WORD.findall(text))
        return made

    parser.make = classmethod(lambda _cls, text: tree(text))

    # moto's handler lists a cached tree's placeholders per request: once per tree and kinds.
    node_class: Any = ast_nodes.Node  # type: ignore[attr-defined]
    find = node_class.find_clauses
    found: weakref.WeakKeyDictionary[Any, dict[Any, list[Any]]] = weakref.WeakKeyDictionary()

    def find_clauses(self: Any, clause_types: Any) -> list[Any]:
        if self not in _WORDS:  # not a cached tree: it may change
            clauses: list[Any] = find(self, clause_types)
            return clauses
        known = found.setdefault(self, {})
        kinds = tuple(clause_types)
        if kinds not in known:
            known[kinds] = find(self, clause_types)
        return list(known[kinds])

    node_class.find_clauses = find_clauses


def _parse_conditions_once() -> None:
    from moto.dynamodb import comparisons

    parser_class: Any = comparisons.ConditionExpressionParser
    parse = parser_class.parse
    value_class: Any = comparisons.AttributeValue
    op_class: Any = comparisons.Op
    not_class: Any = comparisons.OpNot
    func_class: Any = comparisons.Func

    path_class: Any = comparisons.AttributePath

    @functools.lru_cache(maxsize=CACHE_SIZE)
    def template(text: str) -> tuple[Any, list[str], list[str]]:
        found = placeholders(text)
        names = {t: t for t in found if t[0] == "#"}  # a path element "#..." is a placeholder
        values = {t: {_PLACEHOLDER_TYPE: t} for t in found if t[0] == ":"}
        parser = parser_class(text, names, values)
        op = parse(parser)
        return op, list(parser.expr_attr_names_found), list(parser.expr_attr_values_found)

    def bind(node: Any, names: Any, values: Any) -> Any:
        if isinstance(node, value_class):
            return value_class(values[node.value]) if node.type == _PLACEHOLDER_TYPE else node
        if isinstance(node, path_class):
            return path_class([names[e] if _is_name(e) else e for e in node.path])
        if isinstance(node, not_class):
            return type(node)(bind(node.lhs, names, values))
        if isinstance(node, op_class):
            return type(node)(bind(node.lhs, names, values), bind(node.rhs, names, values))
        if isinstance(node, func_class):
            return type(node)(*(bind(a, names, values) for a in node.arguments))
        return node

    def parse_once(self: Any) -> Any:
        text = self.condition_expression
        if not text:
            return parse(self)
        op, names_found, values_found = template(text)
        self.expr_attr_names_found.extend(names_found)
        self.expr_attr_values_found.extend(values_found)
        names = self.expression_attribute_names
        values = self.expression_attribute_values
        key = (text, id(names), id(values))
        hit = bound.get(key)
        if hit is not None and hit[0] is names and hit[1] is values:
            return hit[2]  # this request's maps, bound already (its handler and backend parse)
        made = bind(op, names or {}, values or {})
        bound[key] = (names, values, made)  # holds the maps: their ids stay theirs
        if len(bound) > BOUND_SIZE:
            # the oldest; another thread of an unserialized engine may have taken it
            with contextlib.suppress(KeyError, RuntimeError, StopIteration):
                del bound[next(iter(bound))]
        return made

    # The same text with the same maps (the same objects: one request's), bound once. moto parses
    # a request's condition two or three times; its conditions are read, never changed.
    bound: dict[tuple[str, int, int], tuple[Any, Any, Any]] = {}
    parser_class.parse = parse_once


def _check_update_texts_once() -> None:
    from moto.dynamodb.parsing import validators

    validator_class: Any = validators.UpdateExpressionValidator
    init = validator_class.__init__

    def remember_source(
        self: Any,
        expression: Any,
        expression_attribute_names: Any,
        expression_attribute_values: Any,
        item: Any,
        table: Any,
    ) -> None:
        if expression not in _WORDS:  # not a cached tree: moto's own way
            init(
                self,
                expression,
                expression_attribute_names,
                expression_attribute_values,
                item,
                table,
            )
            return
        # moto's __init__, with a structural copy of the tree instead of ``copy.deepcopy``
        self.expression_attribute_names = expression_attribute_names
        self.expression_attribute_values = expression_attribute_values
        self.item = item
        self.table = table
        self.processors = self.get_ast_processors()
        self.sessionstore_source = expression  # the cached tree (moto validates a copy)

    def validate(self: Any) -> Any:
        source: Any = getattr(self, "sessionstore_source", None)
        words = _WORDS.get(source) if source is not None else None
        if words is None:
            return validate_all(self)  # a tree not from the cache: every check
        names = self.expression_attribute_names
        key = _names_pattern(words, names or {}, self.table.table_key_attrs)
        passed = _PASSED.setdefault(source, set())
        steps = engine_updates.plan(source) if key in passed else None
        if steps is not None:  # the static checks passed for these names: one pass
            try:
                return engine_updates.validated(
                    source, names, self.expression_attribute_values, self.item, self.table
                )
            except engine_updates.Fallback:
                pass  # moto's own walks decide (and raise what they raise)
        node = self.node_to_validate = _clone(source, source.parent)
        for processor in self.processors:
            if type(processor).__name__ in _STATIC_CHECKS and key in passed:
                continue
            node = processor.traverse(node)
        passed.add(key)  # every check passed: the static ones need not run again
        return node

    validate_all = validator_class.validate

    validator_class.__init__ = remember_source
    validator_class.validate = validate


def _plain(node: Any) -> bool:
    """A tree whose nodes hold their children, type and parent, and whose leaves are text."""
    from moto.dynamodb.parsing.ast_nodes import Node  # type: ignore[attr-defined]

    if not isinstance(node, Node):
        return isinstance(node, str | int)
    if set(node.__dict__) != {"children", "type", "parent"}:
        return False
    return all(_plain(child) for child in node.children or ())


def _clone(node: Any, parent: Any) -> Any:
    """A copy of a plain tree (``_plain``): what ``copy.deepcopy`` made of it, cheaper."""
    if isinstance(node, str | int):
        return node
    copied = object.__new__(type(node))
    children = node.children
    copied.__dict__.update(
        type=node.type,
        parent=parent,
        children=None if children is None else [_clone(c, copied) for c in children],
    )
    return copied


def _traverse_cheaply() -> None:
    """moto's tree walkers rebuilt their map of node classes at every node: once per walker."""
    from moto.dynamodb.parsing import ast_nodes

    walker: Any = ast_nodes.DepthFirstTraverser  # type: ignore[attr-defined]
    Node: Any = ast_nodes.Node  # type: ignore[attr-defined]
    kinds: dict[type, tuple[type, ...]] = {}

    def nodes_to_be_processed(self: Any) -> tuple[type, ...]:
        found = kinds.get(type(self))
        if found is None:
            found = kinds[type(self)] = tuple(self._processing_map())
        return found

    def process(self: Any, node: Any) -> Any:
        mapping = self.__dict__.get("sessionstore_map")
        if mapping is None:
            mapping = self.__dict__["sessionstore_map"] = self._processing_map()
        handler = self.__dict__.setdefault("sessionstore_handlers", {})
        name = handler.get(type(node))
        if name is None:  # the first class of the map the node is an instance of
            name = next((k for k in mapping if isinstance(node, k)), False)
            handler[type(node)] = name
        return mapping[name](node) if name else None

    base_pre = walker.pre_processing_of_child

    def traverse(self: Any, root: Any) -> Any:
        """moto's ``traverse_node_recursively``, its per-node lookups done once per walk."""
        kinds = nodes_to_be_processed(self)
        pre = (
            None if type(self).pre_processing_of_child is base_pre else self.pre_processing_of_child
        )

        walker_class = type(self)

        def visit(node: Any, child_id: int) -> Any:
            kind = type(node)
            is_node = _IS_NODE.get(kind)
            if is_node is None:  # Node's metaclass is ABCMeta: isinstance is slow, once per type
                is_node = _IS_NODE[kind] = isinstance(node, Node)
            if is_node:
                parent = node.parent
                if node.children is not None:
                    for i, child in enumerate(node.children):
                        if pre is not None:
                            pre(node, i)
                        visit(child, i)
                processed = _PROCESSED.get((walker_class, kind))
                if processed is None:
                    processed = _PROCESSED[walker_class, kind] = isinstance(node, kinds)
                if processed:
                    node = process(self, node)
                    node.parent = parent
                    if parent:
                        parent.children[child_id] = node
            return node

        return visit(root, -1)

    walker.nodes_to_be_processed = nodes_to_be_processed
    walker.process = process
    walker.traverse = traverse


def _is_name(element: Any) -> bool:
    return isinstance(element, str) and element[:1] == "#"


_WORD = re.compile(r"(?<![#:\w])[A-Za-z_][A-Za-z0-9_]*")


def _names_pattern(words: frozenset[str], names: Any, keys: Any) -> tuple[Any, ...]:
    """What moto's static update checks can see of ``names``: for each placeholder, the key
    attribute or word of the expression it names, else which other placeholders name the same."""
    seen: dict[str, int] = {}
    pattern = []
    for placeholder, name in sorted(names.items()):
        if name in keys or name in words:
            pattern.append((placeholder, "=", name))
        else:
            pattern.append((placeholder, "#", seen.setdefault(name, len(seen))))
    return (tuple(sorted(keys)), tuple(pattern))


def _list_modules_once() -> None:
    """moto read its own modules from disk, and a handler's methods, on every request."""
    from moto import backends
    from moto.core import responses

    modules = tuple(backends.list_of_moto_modules())
    backends.list_of_moto_modules = lambda: modules
    handlers: Any = responses
    methods = handlers.method_names_from_class
    known: dict[Any, list[str]] = {}

    def method_names_from_class(clazz: Any) -> list[str]:
        names = known.get(clazz)
        if names is None:  # the engine's patches are all made before its first request
            names = known[clazz] = methods(clazz)
        return names

    handlers.method_names_from_class = method_names_from_class


def _request_ids_cheaply() -> None:
    """moto drew each request id's 52 characters one ``choice`` at a time: one ``choices``, from
    the same seeded generator and alphabet."""
    import string

    from moto.core import responses
    from moto.moto_api._internal import mock_random
    from moto.utilities import aws_headers

    alphabet = string.ascii_letters + string.digits

    def request_id(headerdict: dict[str, Any] | None = None) -> str:
        made = "".join(mock_random.choices(alphabet, k=52))
        if isinstance(headerdict, dict):
            headerdict.update({"x-amzn-requestid": made})
        return made

    aws_headers.gen_amzn_requestid_long = request_id
    responses.gen_amzn_requestid_long = request_id  # type: ignore[attr-defined]
