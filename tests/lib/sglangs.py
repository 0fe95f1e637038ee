"""The /run_code languages for the serve suites: five programs per language
(a correct one, a compile error, a runtime error, an endless loop and a
memory hog), and the per-language policy snippets of
docs/trainer-integration.md, so that the suite runs under exactly the
policies the documentation gives."""
import json
import os
import re
import shutil

LANGUAGES = ("python", "cpp", "java", "nodejs", "go", "rust", "bash")
# What must be installed for a language (the SKIP reason names it).
TOOLCHAIN = {"python": "/usr/bin/python3", "cpp": "/usr/bin/g++", "java": "/usr/bin/java",
             "nodejs": "/usr/bin/node", "go": "/usr/bin/go", "rust": "/usr/bin/rustc", "bash": "/usr/bin/bash"}
COMPILED = {"cpp", "java", "go", "rust"}

# Each reads two integers and prints their sum.
CORRECT = {
    "python": "a, b = map(int, input().split())\nprint(a + b)\n",
    "cpp": "#include <iostream>\nint main() { long a, b; std::cin >> a >> b; std::cout << a + b << std::endl; }\n",
    "java": "import java.util.*;\n\npublic class Main {\n    public static void main(String[] args) {\n"
            "        Scanner s = new Scanner(System.in);\n        long a = s.nextLong(), b = s.nextLong();\n"
            "        Runnable r = new Runnable() { public void run() { System.out.println(a + b); } };\n"
            "        r.run();\n    }\n}\n",   # an inner class: Main$1.class must reach the run
    "nodejs": "const [a, b] = require('fs').readFileSync(0, 'utf8').trim().split(/\\s+/).map(Number);\n"
              "console.log(a + b);\n",
    "go": "package main\n\nimport \"fmt\"\n\nfunc main() {\n\tvar a, b int\n\tfmt.Scan(&a, &b)\n\tfmt.Println(a + b)\n}\n",
    "rust": "use std::io::Read;\nfn main() {\n    let mut s = String::new();\n"
            "    std::io::stdin().read_to_string(&mut s).unwrap();\n"
            "    let v: Vec<i64> = s.split_whitespace().map(|x| x.parse().unwrap()).collect();\n"
            "    println!(\"{}\", v[0] + v[1]);\n}\n",
    "bash": "read a b\necho $((a + b))\n",
}
# A compile error (a syntax error for the interpreted ones).
BROKEN = {
    "python": "print(1 +)\n",
    "cpp": "int main() { return undeclared; }\n",
    "java": "public class Main { public static void main(String[] a) { int x = \"s\"; } }\n",
    "nodejs": "console.log(1 +);\n",
    "go": "package main\n\nfunc main() { x := 1 }\n",
    "rust": "fn main() { let x: i32 = \"s\"; }\n",
    "bash": "if then fi\n",
}
# Fails at run time with a non-zero exit.
CRASH = {
    "python": "raise ValueError('boom')\n",
    "cpp": "#include <stdexcept>\nint main() { throw std::runtime_error(\"boom\"); }\n",
    "java": "public class Main { public static void main(String[] a) { throw new IllegalStateException(\"boom\"); } }\n",
    "nodejs": "throw new Error('boom');\n",
    "go": "package main\n\nfunc main() { panic(\"boom\") }\n",
    "rust": "fn main() { panic!(\"boom\"); }\n",
    "bash": "echo boom >&2\nexit 3\n",
}
# Never ends.
LOOP = {
    "python": "while True: pass\n",
    "cpp": "int main() { volatile unsigned long i = 0; for (;;) i++; }\n",
    "java": "public class Main { public static void main(String[] a) { long i = 0; while (true) i++; } }\n",
    "nodejs": "for (;;) {}\n",
    "go": "package main\n\nfunc main() {\n\ti := 0\n\tfor {\n\t\ti++\n\t}\n}\n",
    "rust": "fn main() {\n    let mut i: u64 = 0;\n    loop {\n"
            "        unsafe { std::ptr::write_volatile(&mut i, i.wrapping_add(1)) };\n    }\n}\n",
    "bash": "while :; do :; done\n",
}
# Keeps allocating (and touching) memory.
HOG = {
    "python": "a = []\nwhile True:\n    a.append(bytearray(10 ** 7))\n",
    "cpp": "#include <vector>\n#include <cstring>\nint main() { std::vector<char *> v; for (;;) { char *p = new char[1 << 24];"
           " std::memset(p, 1, 1 << 24); v.push_back(p); } }\n",
    "java": "import java.util.*;\n\npublic class Main { public static void main(String[] a) {"
            " List<byte[]> l = new ArrayList<>(); while (true) l.add(new byte[1 << 24]); } }\n",
    "nodejs": "const a = [];\nfor (;;) a.push(new Array(1e6).fill(1));\n",
    "go": "package main\n\nfunc main() {\n\tvar keep [][]byte\n\tfor {\n\t\tb := make([]byte, 1<<24)\n"
          "\t\tfor i := range b {\n\t\t\tb[i] = 1\n\t\t}\n\t\tkeep = append(keep, b)\n\t}\n}\n",
    "rust": "fn main() { let mut keep: Vec<Vec<u8>> = Vec::new(); loop { keep.push(vec![1u8; 1 << 24]); } }\n",
    "bash": "s=x\nwhile :; do s=$s$s; done\n",
}


def missing(language):
    """Why a language cannot be tested here, or None."""
    tool = TOOLCHAIN[language]
    return None if os.access(tool, os.X_OK) else "%s is not installed (scripts/install-deps.sh)" % tool


def snippets(src):
    """{language: policy fragment} from the <!-- snippet: L --> blocks of
    docs/trainer-integration.md."""
    with open(os.path.join(src, "docs", "trainer-integration.md")) as f:
        text = f.read()
    found = {}
    for m in re.finditer(r"<!-- snippet: (\w+) -->\s*```json\n(.*?)```", text, re.S):
        found[m.group(1)] = json.loads(m.group(2))
    return found


def policy(src, language, tenant, scratch, extra_limits=None):
    """policies/default.json with the language's snippet merged in (each
    top-level section updated), the tenant and the scratch root."""
    with open(os.path.join(src, "policies", "default.json")) as f:
        p = json.load(f)
    for section, value in snippets(src)[language].items():
        if isinstance(value, dict):
            p.setdefault(section, {}).update(value)
        else:
            p[section] = value
    p["tenant"] = tenant
    p["files"]["scratch_root"] = scratch
    p["failure"] = {"mode": "skip"}
    p["limits"].update(extra_limits or {})
    return p


def have(tool):
    return shutil.which(tool) is not None


def serve_each(suite, prefix, one, says, extra_limits=None, after=None, languages=None):
    """The language suites' main: a private agent enforcing, a policy per
    language (tenant prefix + language, policy() above), one `sandguard
    serve` running them all; one(lang, srv, agent) -> None or why it
    failed, reported per language as "<suite> <lang>: <says>"; after(langs, srv, agent,
    env) for more cases. A missing toolchain is a SKIP."""
    from sgagent import Agent
    from sgserve import SRC, UID_BASE, Env, Server, can_run
    from sgtest import exit_code, report
    import sys
    if not can_run(suite):
        return 0
    langs = [lang for lang in (languages or LANGUAGES) if not missing(lang)]
    for lang in languages or LANGUAGES:
        if missing(lang):
            report("SKIP", "%s %s" % (suite, lang), missing(lang))
    if not langs:
        return exit_code()
    agent = Agent({}, name=prefix.strip("-"))
    env = Env()
    srv = None
    try:
        for lang in langs:
            with open(os.path.join(agent.policy_dir, prefix + lang + ".json"), "w") as f:
                json.dump(policy(SRC, lang, prefix + lang, agent.scratch, extra_limits), f, indent=1)
        if not agent.start():
            report("SKIP", suite, "the agent did not start: %s" % agent.log_tail())
            return exit_code()
        srv = Server(env, "--languages", ",".join(langs), "--policy-dir", agent.policy_dir,
                     env_override=dict(agent.env, SANDGUARD_UID_BASE=str(UID_BASE)))
        for lang in langs:
            try:
                why = one(lang, srv, agent)
            except Exception as e:   # noqa: BLE001 - every failure is a finding
                why = "exception: %r" % e
            report("FAIL" if why else "PASS", "%s %s%s" % (suite, lang, "" if why else ": " + says), why or "")
            if why:
                print("server log: " + srv.log_tail(), file=sys.stderr, flush=True)
        if after:
            after(langs, srv, agent, env)
    finally:
        if srv:
            srv.stop()
        env.cleanup()
        agent.cleanup()
    return exit_code()
