"""The built-in calculator: arithmetic a model asks for, computed by walking the expression's syntax
tree (numbers, + - * / // % **, unary signs, parentheses, a fixed set of math functions and
constants). Nothing is ever evaluated as code, and every step is bounded (the expression's length,
its nesting, the size of whole numbers, the factorial's argument), so no expression can run long or
eat memory. Every refusal is one sentence the model (and the user, on the card) can act on."""

from __future__ import annotations

import ast
import math
import operator
import warnings
from collections.abc import Callable
from typing import Any

MAX_EXPRESSION_CHARS = 1000
MAX_DEPTH = 60  # nested operations and calls
MAX_INT_BITS = 10_000  # about 3,000 decimal digits
MAX_FACTORIAL = 1000

Number = int | float


class CalculatorError(Exception):
    """An expression the calculator refuses: the message is the sentence given back."""


_TOO_LARGE = "The result would be too large (more than about 3,000 digits), so the calculator refuses it."

_CONSTANTS: dict[str, float] = {"pi": math.pi, "e": math.e, "tau": math.tau}


def _whole(name: str, value: Number, low: int = 0, high: int = MAX_FACTORIAL) -> int:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or not low <= value <= high:
        raise CalculatorError(f"{name} takes a whole number from {low} to {high}.")
    return value


def _factorial(n: Number) -> int:
    return math.factorial(_whole("factorial", n))


def _comb(n: Number, k: Number) -> int:
    return math.comb(_whole("comb", n), _whole("comb", k))


def _perm(n: Number, k: Number) -> int:
    return math.perm(_whole("perm", n), _whole("perm", k))


def _gcd(*values: Number) -> int:
    return math.gcd(*(_whole("gcd", v, -(2**MAX_INT_BITS), 2**MAX_INT_BITS) for v in values))


def _round(value: Number, digits: Number = 0) -> Number:
    places = _whole("round's second argument", digits, -300, 300)
    return round(value, places) if places or isinstance(value, float) else round(value)


def _log(value: Number, base: Number | None = None) -> float:
    return math.log(value) if base is None else math.log(value, base)


# name -> (function, fewest arguments, most arguments (None: any number))
_FUNCTIONS: dict[str, tuple[Callable[..., Any], int, int | None]] = {
    "abs": (abs, 1, 1),
    "sqrt": (math.sqrt, 1, 1),
    "cbrt": (math.cbrt, 1, 1),
    "exp": (math.exp, 1, 1),
    "log": (_log, 1, 2),
    "log10": (math.log10, 1, 1),
    "log2": (math.log2, 1, 1),
    "sin": (math.sin, 1, 1),
    "cos": (math.cos, 1, 1),
    "tan": (math.tan, 1, 1),
    "asin": (math.asin, 1, 1),
    "acos": (math.acos, 1, 1),
    "atan": (math.atan, 1, 1),
    "atan2": (math.atan2, 2, 2),
    "sinh": (math.sinh, 1, 1),
    "cosh": (math.cosh, 1, 1),
    "tanh": (math.tanh, 1, 1),
    "degrees": (math.degrees, 1, 1),
    "radians": (math.radians, 1, 1),
    "hypot": (math.hypot, 1, None),
    "floor": (math.floor, 1, 1),
    "ceil": (math.ceil, 1, 1),
    "trunc": (math.trunc, 1, 1),
    "round": (_round, 1, 2),
    "min": (min, 2, None),
    "max": (max, 2, None),
    "factorial": (_factorial, 1, 1),
    "comb": (_comb, 2, 2),
    "perm": (_perm, 2, 2),
    "gcd": (_gcd, 1, None),
}

KNOWN = "It knows the functions " + ", ".join(sorted(_FUNCTIONS)) + " and the constants " + ", ".join(_CONSTANTS) + "."

_SYMBOLS = {
    ast.BitXor: "^",
    ast.BitAnd: "&",
    ast.BitOr: "|",
    ast.LShift: "<<",
    ast.RShift: ">>",
    ast.MatMult: "@",
    ast.Invert: "~",
    ast.Not: "not",
}


def _check(value: Any) -> Number:
    """Every intermediate value is a finite real number of bounded size."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        if isinstance(value, complex):
            raise CalculatorError(
                "The result is not a real number (for example a fractional power of a negative number)."
            )
        raise CalculatorError("The calculator works with numbers only.")
    if isinstance(value, float) and not math.isfinite(value):
        raise CalculatorError(_TOO_LARGE if math.isinf(value) else "The result is not a number.")
    if isinstance(value, int) and value.bit_length() > MAX_INT_BITS:
        raise CalculatorError(_TOO_LARGE)
    return value


def _power(base: Number, exponent: Number) -> Any:
    if base == 0 and exponent < 0:
        raise CalculatorError("Zero cannot be raised to a negative power (that divides by zero).")
    # an exact power has about exponent * log2(|base|) bits: refuse before computing it
    whole = isinstance(base, int) and isinstance(exponent, int) and exponent > 0 and abs(base) > 1
    if whole and (exponent > MAX_INT_BITS or exponent * (abs(base).bit_length() - 1) > MAX_INT_BITS):
        raise CalculatorError(_TOO_LARGE)
    return base**exponent


def _multiply(a: Number, b: Number) -> Any:
    if isinstance(a, int) and isinstance(b, int) and a.bit_length() + b.bit_length() > MAX_INT_BITS + 1:
        raise CalculatorError(_TOO_LARGE)
    return a * b


_BINARY: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: _multiply,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: _power,
}


class _Walker:
    def value(self, node: ast.AST, depth: int) -> Number:
        if depth > MAX_DEPTH:
            raise CalculatorError(f"The expression is nested too deeply (more than {MAX_DEPTH} levels).")
        if isinstance(node, ast.Constant):
            if isinstance(node.value, bool) or not isinstance(node.value, (int, float)):
                raise CalculatorError("The calculator works with numbers only (no text, true/false or imaginary).")
            return _check(node.value)
        if isinstance(node, ast.Name):
            if node.id in _CONSTANTS:
                return _CONSTANTS[node.id]
            raise CalculatorError(f"The calculator does not know '{node.id}'. {KNOWN}")
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.UAdd, ast.USub)):
            operand = self.value(node.operand, depth + 1)
            return _check(-operand if isinstance(node.op, ast.USub) else +operand)
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            left = self.value(node.left, depth + 1)
            right = self.value(node.right, depth + 1)
            return _check(_BINARY[type(node.op)](left, right))
        if isinstance(node, ast.Call):
            return self.call(node, depth)
        raise CalculatorError(_unsupported(node))

    def call(self, node: ast.Call, depth: int) -> Number:
        if not isinstance(node.func, ast.Name):
            raise CalculatorError(_unsupported(node.func))
        name = node.func.id
        if name not in _FUNCTIONS:
            raise CalculatorError(f"The calculator does not know '{name}'. {KNOWN}")
        if node.keywords or any(isinstance(a, ast.Starred) for a in node.args):
            raise CalculatorError(f"Functions take plain arguments, not name=value: write {name}(4), for example.")
        function, fewest, most = _FUNCTIONS[name]
        count = len(node.args)
        if count < fewest or (most is not None and count > most):
            wanted = str(fewest) if fewest == most else f"{fewest} or more" if most is None else f"{fewest} or {most}"
            raise CalculatorError(f"{name} takes {wanted} argument{'s' if wanted != '1' else ''}, not {count}.")
        args = [self.value(a, depth + 1) for a in node.args]
        try:
            return _check(function(*args))
        except (ValueError, TypeError):
            shown = ", ".join(_format(a) for a in args)
            raise CalculatorError(f"{name} cannot take {shown}: it is outside what {name} accepts.") from None


def _unsupported(node: ast.AST) -> str:
    op = getattr(node, "op", None)
    if isinstance(op, ast.BitXor):
        return "The calculator does not use '^' for powers: write them with ** (2 ** 10)."
    symbol = _SYMBOLS.get(type(op)) if op is not None else None
    what = f"'{symbol}'" if symbol else "that"
    return (
        f"The calculator does not support {what}: it works with numbers, + - * / // % **, "
        "parentheses and its math functions."
    )


def _format(value: Number) -> str:
    if isinstance(value, int):
        return str(value)
    text = f"{value:.15g}"
    return "0" if text == "-0" else text


def calculate(expression: str) -> str:
    """The value of `expression`, written as a calculator shows it. Raises CalculatorError."""
    text = expression.strip()
    if not text:
        raise CalculatorError("Give the calculator an expression, for example 2 * (3 + 4).")
    if len(text) > MAX_EXPRESSION_CHARS:
        raise CalculatorError(
            f"The expression is {len(text)} characters long; the calculator takes at most {MAX_EXPRESSION_CHARS}."
        )
    try:
        with warnings.catch_warnings():  # ("4x": Python warns before it refuses; the refusal is the answer)
            warnings.simplefilter("ignore", SyntaxWarning)
            tree = ast.parse(text, mode="eval")
    except SyntaxError as e:
        raise CalculatorError(
            f"The expression is not valid arithmetic ({e.msg}); write it like 2 * (3 + 4) or sqrt(2) / 3."
        ) from None
    except (RecursionError, MemoryError):
        raise CalculatorError(f"The expression is nested too deeply (more than {MAX_DEPTH} levels).") from None
    try:
        return _format(_Walker().value(tree.body, 0))
    except ZeroDivisionError:
        raise CalculatorError("The expression divides by zero, which has no result.") from None
    except OverflowError:
        raise CalculatorError(_TOO_LARGE) from None
    except RecursionError:
        raise CalculatorError(f"The expression is nested too deeply (more than {MAX_DEPTH} levels).") from None
