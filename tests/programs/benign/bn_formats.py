# Benign: parsing and formats: email, xml, html, urllib.parse, argparse,
# configparser, importing a module written into the scratch.
import argparse, configparser, email.message, html.parser, importlib, json, os, sys
import urllib.parse, xml.etree.ElementTree as ET

batch = json.load(sys.stdin)
msg = email.message.EmailMessage()
msg["Subject"] = "score"
msg.set_content("body")
assert "Subject: score" in msg.as_string()
root = ET.fromstring("<r><i v='1'/><i v='2'/></r>")
assert [i.get("v") for i in root] == ["1", "2"]


class Links(html.parser.HTMLParser):
    seen = []

    def handle_starttag(self, tag, attrs):
        self.seen.append(tag)

Links().feed("<p><a href='x'>y</a></p>")
assert Links.seen == ["p", "a"]
assert urllib.parse.urlparse("https://example.com/a?b=c").query == "b=c"
args = argparse.ArgumentParser().parse_args([])
cfg = configparser.ConfigParser()
cfg.read_string("[s]\nk = v\n")
assert cfg["s"]["k"] == "v"
with open("helper_mod.py", "w") as f:
    f.write("VALUE = 7\n")
sys.path.insert(0, os.getcwd())
assert importlib.import_module("helper_mod").VALUE == 7
print(json.dumps([1.0] * len(batch["items"])))
