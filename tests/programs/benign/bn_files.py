# Benign: files in the scratch and in the private /tmp: tempfile, shutil,
# archives, sqlite, csv, pickle, mmap.
import csv, glob, io, json, mmap, os, pathlib, pickle, shutil, sqlite3, sys, tarfile, tempfile
import zipfile

batch = json.load(sys.stdin)
home = pathlib.Path.home()
assert home == pathlib.Path(os.getcwd())
with tempfile.TemporaryDirectory() as d:
    assert d.startswith(tempfile.gettempdir())
    p = pathlib.Path(d, "a", "b")
    p.mkdir(parents=True)
    (p / "x.txt").write_text("hello")
    shutil.copytree(os.path.join(d, "a"), os.path.join(d, "copy"))
    assert sorted(glob.glob(os.path.join(d, "**", "*.txt"), recursive=True))
    archive = shutil.make_archive(os.path.join(d, "arch"), "gztar", d, "a")
    with tarfile.open(archive) as t:
        assert "a/b/x.txt" in t.getnames()
    with zipfile.ZipFile(os.path.join(d, "z.zip"), "w") as z:
        z.writestr("inner.txt", "zip")
    shutil.rmtree(os.path.join(d, "copy"))
with tempfile.NamedTemporaryFile("w+") as f:
    f.write("data")
    f.flush()
    f.seek(0)
    assert f.read() == "data"
db = sqlite3.connect("scores.db")
db.execute("create table t (k text, v real)")
db.executemany("insert into t values (?, ?)", [(i["completion"], 1.0) for i in batch["items"]])
db.commit()
assert db.execute("select count(*) from t").fetchone()[0] == len(batch["items"])
db.close()
with open("rows.csv", "w", newline="") as f:
    csv.writer(f).writerows([["a", 1], ["b", 2]])
with open("rows.csv") as f:
    assert len(list(csv.reader(f))) == 2
with open("obj.pkl", "wb") as f:
    pickle.dump({"k": [1, 2]}, f)
with open("obj.pkl", "rb") as f:
    assert pickle.load(f) == {"k": [1, 2]}
with open("map.bin", "wb") as f:
    f.write(b"\0" * 4096)
with open("map.bin", "r+b") as f, mmap.mmap(f.fileno(), 4096) as m:
    m[0:5] = b"hello"
assert io.BytesIO(b"x").read() == b"x"
os.makedirs("out", exist_ok=True)
for name in os.listdir("."):
    os.stat(name)
print(json.dumps([1.0] * len(batch["items"])))
