#!/usr/bin/python3
"""bodies.py ROOT OUTDIR SIZE - the bodies loadtest/compress measures, SIZE bytes each.

body.json  an API answer: a JSON array of user records (ids, names, e-mails,
           booleans, scores, tags, timestamps), from a fixed seed
body.html  a page: this repository's docs (README.md, docs/**/*.md) as HTML
           paragraphs and headings, in a page with a nav and classes, as a
           site's pages look; real prose rather than generated words
"""
import html
import json
import os
import random
import sys


def json_body(size):
    rnd = random.Random(27)
    first = ["ada", "alan", "grace", "edsger", "barbara", "ken", "dennis", "linus", "margaret"]
    tags = ["admin", "beta", "billing", "eu", "us", "mobile", "web", "trial", "vip", "api"]
    out, i = [], 0
    while True:
        name = rnd.choice(first) + str(rnd.randint(1, 9999))
        out.append({"id": 100000 + i, "name": name, "email": name + "@example.com",
                    "active": rnd.random() < 0.7, "score": round(rnd.random() * 100, 2),
                    "tags": rnd.sample(tags, rnd.randint(0, 3)),
                    "created": "2026-%02d-%02dT%02d:%02d:%02dZ" % (
                        rnd.randint(1, 12), rnd.randint(1, 28), rnd.randint(0, 23),
                        rnd.randint(0, 59), rnd.randint(0, 59))})
        i += 1
        text = json.dumps({"data": out, "next": None}, separators=(",", ":"))
        if len(text) >= size:
            out.pop()
            text = json.dumps({"data": out, "next": None}, separators=(",", ":"))
            return text + " " * (size - len(text))


def html_body(root, size):
    paths = [os.path.join(root, "README.md")]
    for d, _, files in sorted(os.walk(os.path.join(root, "docs"))):
        paths += [os.path.join(d, f) for f in sorted(files) if f.endswith(".md")]
    parts = []
    for p in paths:
        with open(p, encoding="utf-8") as f:
            for para in f.read().split("\n\n"):
                para = para.strip()
                if para.startswith("#"):
                    parts.append("<h2 class=\"section\">%s</h2>" % html.escape(para.lstrip("# ")))
                elif para:
                    parts.append("<p class=\"text\">%s</p>" % html.escape(para))
    head = ("<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>Switchyard"
            "</title><link rel=\"stylesheet\" href=\"/s.css\"></head><body><nav class=\"top\">"
            "<a href=\"/\">Home</a> <a href=\"/docs/\">Docs</a></nav><main class=\"content\">\n")
    body, k = head, 0
    while len(body.encode()) < size:
        body += parts[k % len(parts)] + "\n"
        k += 1
    return body.encode()[:size]


def main():
    root, out, size = sys.argv[1], sys.argv[2], int(sys.argv[3])
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "body.json"), "w") as f:
        f.write(json_body(size))
    with open(os.path.join(out, "body.html"), "wb") as f:
        f.write(html_body(root, size))


if __name__ == "__main__":
    main()
