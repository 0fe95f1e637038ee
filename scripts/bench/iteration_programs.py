"""Scenario 17's problems: one RL iteration's batch, seeded.

Each problem is one of scenario 5's six tasks (verifier.TASKS: sum, max,
sort, reverse, count words, Fibonacci mod p) with 15 stdin/stdout tests,
and one sampled program for it, in Python or C++ (problems i with
i % 10 in CPP_SLOTS are C++: 30%). The program is correct, or carries
one fault (FAULT_SHARES): a wrong answer on 1-3 tests, a runtime error on
one, a timeout on one (it sleeps past the deadline: see iteration.py), or,
for C++, a compile error. Every test's expected verdict follows from the
construction, so both ways are checked against it as well as against
each other."""
import json
import random

import verifier

N_TESTS = 15
CPP_SLOTS = (2, 5, 8)  # i % 10: 30% of the problems are C++
# Cumulative shares: the rest up to 1.0 is a compile error (C++) or a
# wrong answer (Python, which has no compile step).
FAULT_SHARES = (("ok", 0.90), ("wrong", 0.94), ("crash", 0.96), ("timeout", 0.99))

# scenario 5's programs and faults, and a timeout that sleeps past the
# deadline instead of spinning (iteration.py says why).
PY_FAULTS = dict(verifier.FAULTS, timeout="if data in {triggers!r}:\n    import time; time.sleep(3600)\n")

CPP = """#include <algorithm>
#include <iostream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>
#include <unistd.h>
// problem {n}, copy {salt}

static std::vector<long> numbers(const std::string &data) {{
    std::istringstream in(data);
    std::vector<long> v;
    long x;
    while (in >> x) v.push_back(x);
    return v;
}}

static std::string solve(const std::string &data) {{
{body}
}}

int main() {{
    std::string data((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
{fault}    std::cout << solve(data) << "\\n";
    return 0;
}}
"""

# The same answers as verifier.TASKS' Python reference solutions.
CPP_BODIES = {
    "sum": "    long s = 0;\n    for (long x : numbers(data)) s += x;\n    return std::to_string(s);",
    "max": "    std::vector<long> v = numbers(data);\n"
           "    return std::to_string(*std::max_element(v.begin(), v.end()));",
    "sort": "    std::vector<long> v = numbers(data);\n    std::sort(v.begin(), v.end());\n"
            "    std::string out;\n    for (size_t i = 0; i < v.size(); i++)\n"
            "        out += (i ? \" \" : \"\") + std::to_string(v[i]);\n    return out;",
    "reverse": "    std::string s = data;\n"
               "    while (!s.empty() && isspace((unsigned char)s.back())) s.pop_back();\n"
               "    size_t b = 0;\n    while (b < s.size() && isspace((unsigned char)s[b])) b++;\n"
               "    s = s.substr(b);\n    std::reverse(s.begin(), s.end());\n    return s;",
    "words": "    std::istringstream in(data);\n    std::string w;\n    long n = 0;\n"
             "    while (in >> w) n++;\n    return std::to_string(n);",
    "fib": "    long n = numbers(data)[0], a = 0, b = 1;\n"
           "    for (long i = 0; i < n; i++) { long t = (a + b) % 1000000007; a = b; b = t; }\n"
           "    return std::to_string(a);",
}


def cpp_fault(kind, triggers):
    if kind == "ok" or kind == "compile_error":
        return ""
    cond = " || ".join("data == %s" % json.dumps(t) for t in triggers)
    action = {"wrong": "std::cout << \"wrong answer\\n\"; return 0;",
              "crash": "return 3;",
              "timeout": "sleep(3600);"}[kind]
    return "    if (%s) { %s }\n" % (cond, action)


def expected_verdict(kind, is_trigger):
    if kind == "compile_error":
        return "compile_error"
    if kind == "ok" or not is_trigger:
        return "pass"
    return {"wrong": "wrong", "crash": "error", "timeout": "timeout"}[kind]


def generate(n_problems, seed=17):
    """[{language, task, fault, tests: [{input, output}], expected: [verdict]}]
    with a code(salt) text per problem (each way compiles its own copy)."""
    rng = random.Random(seed)
    names = sorted(verifier.TASKS)
    out = []
    for i in range(n_problems):
        language = "cpp" if i % 10 in CPP_SLOTS else "python"
        task = names[(i // 3) % len(names)]
        body, gen = verifier.TASKS[task]
        inputs = verifier.distinct_inputs(gen, rng, N_TESTS)
        roll = rng.random()
        kind = next((k for k, share in FAULT_SHARES if roll < share),
                    "compile_error" if language == "cpp" else "wrong")
        n_trig = rng.randint(1, 3) if kind == "wrong" else 1
        triggers = rng.sample(inputs, n_trig) if kind in ("wrong", "crash", "timeout") else []
        tests = [{"input": x, "output": verifier.reference(body, x) + "\n"} for x in inputs]
        out.append({"n": i, "language": language, "task": task, "fault": kind, "tests": tests,
                    "triggers": triggers,
                    "expected": [expected_verdict(kind, x in triggers) for x in inputs]})
    return out


def code(problem, salt):
    """The problem's program; `salt` makes a copy no other way's build
    shares (the build cache keys on the code's digest)."""
    task, kind = problem["task"], problem["fault"]
    if problem["language"] == "python":
        body = verifier.TASKS[task][0]
        return "# problem %d, copy %s\n" % (problem["n"], salt) + verifier.PROGRAM.format(
            body=body, fault=PY_FAULTS[kind].format(triggers=problem["triggers"]))
    body = CPP_BODIES[task]
    if kind == "compile_error":
        body = "    return undeclared_%d;" % problem["n"]
    return CPP.format(n=problem["n"], salt=salt, body=body,
                      fault=cpp_fault(kind, problem["triggers"]))
