# Benign: deep and wide directory trees in the scratch and in /tmp (the
# agent judges "inside the scratch" by superblock, with no ancestor walk).
import json, os, sys, tempfile

batch = json.load(sys.stdin)
for base in (os.getcwd(), tempfile.mkdtemp()):
    path = base
    for depth in range(200):
        path = os.path.join(path, "d%d" % depth)
    os.makedirs(path)
    with open(os.path.join(path, "deep.txt"), "w") as f:
        f.write("deep")
    with open(os.path.join(path, "deep.txt")) as f:
        assert f.read() == "deep"
    wide = os.path.join(base, "wide")
    os.mkdir(wide)
    for i in range(2000):
        with open(os.path.join(wide, "f%d" % i), "w") as f:
            f.write(str(i))
    assert sum(len(files) for _, _, files in os.walk(base)) >= 2001
print(json.dumps([1.0] * len(batch["items"])))
