"""The spec's reference Countdown reward, transcribed with `eval` — a test and benchmark oracle.

Never import this from library code: it hangs on `2**99**99` and is quadratic on hostile input.
"""

import re
import warnings


def extract_solution(solution_str):
    if "Assistant:" in solution_str:
        solution_str = solution_str.split("Assistant:", 1)[1]
    elif "<|im_start|>assistant" in solution_str:
        solution_str = solution_str.split("<|im_start|>assistant", 1)[1]
    solution_str = solution_str.split("\n")[-1]
    matches = list(re.finditer(r"<answer>(.*?)</answer>", solution_str))
    return matches[-1].group(1).strip() if matches else None


def validate_equation(equation_str, available_numbers):
    try:
        numbers_in_eq = [int(n) for n in re.findall(r"\d+", equation_str)]
        return sorted(numbers_in_eq) == sorted(available_numbers)
    except Exception:
        return False


def evaluate_equation(equation_str):
    try:
        if not re.match(r"^[\d+\-*/().\s]+$", equation_str):
            raise ValueError("Invalid characters in equation.")
        with warnings.catch_warnings():
            # "(1)(2)" compiles with a SyntaxWarning before it fails: the oracle's noise only.
            warnings.simplefilter("ignore", SyntaxWarning)
            return eval(equation_str, {"__builtins__": None}, {})
    except Exception:
        return None


def compute_score(solution_str, ground_truth, method="strict", format_score=0.1, score=1.0):
    target = ground_truth["target"]
    numbers = ground_truth["numbers"]
    equation = extract_solution(solution_str)
    if equation is None:
        return 0
    if not validate_equation(equation, numbers):
        return format_score
    try:
        result = evaluate_equation(equation)
        if result is None:
            return format_score
        return score if abs(result - target) < 1e-5 else format_score
    except Exception:
        return format_score
