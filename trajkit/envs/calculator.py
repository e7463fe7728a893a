"""An arithmetic evaluator (a restricted `ast` walk, no `eval`): the calculator tool of the tool-use environment.

The expression is parsed with :mod:`ast` and only numbers, ``+ - * / // % **``, unary signs, parentheses
and the functions ``abs``, ``min``, ``max``, ``round`` are evaluated; anything else (names, attributes,
calls to other functions, comprehensions, strings) is refused. No ``eval``, no builtins. Runaway work is
stopped two ways: every node checks a wall-clock deadline (``timeout_s``), and operations that could blow
up in a single node are bounded before they run (exponents, integer size).

>>> evaluate("2 * (3 + 4)")
'14'
>>> evaluate("__import__('os')")
'error: name not allowed: __import__'
"""
from __future__ import annotations

import ast
import operator
import time

BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
          ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow}
UNARY = {ast.UAdd: operator.pos, ast.USub: operator.neg}
FUNCTIONS = {"abs": abs, "min": min, "max": max, "round": round}
MAX_EXPONENT = 64
MAX_INT_BITS = 4096
MAX_CHARS = 256


class CalculatorError(Exception):
    """The expression is not allowed or took too long."""


def _pow(a, b):
    if abs(b) > MAX_EXPONENT:
        raise CalculatorError(f"exponent {b} too large (limit {MAX_EXPONENT})")
    return operator.pow(a, b)


def _eval(node: ast.AST, deadline: float):
    if time.perf_counter() > deadline:
        raise CalculatorError("time limit exceeded")
    if isinstance(node, ast.Expression):
        return _eval(node.body, deadline)
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in BINARY:
        a, b = _eval(node.left, deadline), _eval(node.right, deadline)
        fn = _pow if isinstance(node.op, ast.Pow) else BINARY[type(node.op)]
        out = fn(a, b)
        if isinstance(out, int) and out.bit_length() > MAX_INT_BITS:
            raise CalculatorError("result too large")
        return out
    if isinstance(node, ast.UnaryOp) and type(node.op) in UNARY:
        return UNARY[type(node.op)](_eval(node.operand, deadline))
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in FUNCTIONS \
            and not node.keywords:
        return FUNCTIONS[node.func.id](*[_eval(a, deadline) for a in node.args])
    if isinstance(node, ast.Name):
        raise CalculatorError(f"name not allowed: {node.id}")
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        raise CalculatorError(f"name not allowed: {node.func.id}")
    raise CalculatorError(f"{type(node).__name__} not allowed")


def _format(value) -> str:
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return str(round(value, 6)) if isinstance(value, float) else str(value)


def evaluate(expression: str, timeout_s: float = 0.5) -> str:
    """The value of ``expression`` as text, or ``"error: ..."`` (never raises for bad input)."""
    if not isinstance(expression, str) or len(expression) > MAX_CHARS:
        return f"error: expression must be a string of at most {MAX_CHARS} characters"
    try:
        tree = ast.parse(expression.strip(), mode="eval")
        return _format(_eval(tree, time.perf_counter() + timeout_s))
    except CalculatorError as exc:
        return f"error: {exc}"
    except (SyntaxError, ValueError, TypeError, ZeroDivisionError, OverflowError, RecursionError) as exc:
        return f"error: {type(exc).__name__}: {exc}"


SandboxError = CalculatorError  # its name before the move (trajkit.rl.sandbox); Harbor's SandboxError is another
