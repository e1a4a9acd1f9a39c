"""The HTML report's stylesheet and content security policy.

Clean and quiet: system fonts, tabular figures for numbers, light rules, one
accent colour. No web fonts or other fetched resources: the policy below
forbids them, and every script but the report's own (``interact.SCRIPT``, allowed
by its hash), so the page works offline and a hostile name that somehow
reached the markup still could not run.
"""

from __future__ import annotations

from traceparse.report.interact import SCRIPT_HASH

__all__ = ["CSP", "STYLE"]

CSP = "; ".join(
    [
        "default-src 'none'",
        "style-src 'unsafe-inline'",
        f"script-src '{SCRIPT_HASH}'",
        "img-src data:",
        "base-uri 'none'",
        "form-action 'none'",
    ]
)

STYLE = """
:root {
  --ink:#1f2933;
  --muted:#616e7c;
  --line:#e4e7eb;
  --soft:#f5f7fa;
  --accent:#2563eb;
  --ok:#047857;
  --ok-bg:#ecfdf5;
  --warn:#b45309;
  --warn-bg:#fffbeb;
  --unk:#475569;
  --unk-bg:#f1f5f9;
}
* {
  box-sizing: border-box;
}
html {
  -webkit-text-size-adjust: 100%;
}
body {
  margin: 0;
  color: var(--ink);
  background: #fff;
  font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue",
    "Liberation Sans", "DejaVu Sans", Arial, sans-serif;
}
main {
  max-width: 1200px;
  margin: 0 auto;
  padding: 32px 28px 48px;
}
h1 {
  font-size: 26px;
  margin: 0 0 4px;
  letter-spacing: -0.01em;
}
h2 {
  font-size: 21px;
  margin: 40px 0 6px;
  padding-top: 12px;
  border-top: 2px solid var(--ink);
}
h3 {
  font-size: 18px;
  margin: 32px 0 12px;
}
h4 {
  font-size: 15px;
  margin: 28px 0 8px;
}
.meta, .paths, figcaption, .note {
  color: var(--muted);
  font-size: 13px;
}
.paths {
  margin: 0 0 12px;
  word-break: break-all;
}
code {
  font: 12.5px/1.4 ui-monospace, "SFMono-Regular", "DejaVu Sans Mono", Menlo, Consolas,
    monospace;
  background: var(--soft);
  padding: 1px 4px;
  border-radius: 3px;
  overflow-wrap: break-word;
}
td code {
  /* Long op names wrap anywhere, so no table is wider than the page. */
  overflow-wrap: anywhere;
}
th {
  cursor: pointer;
}
th[aria-sort="ascending"]::after {
  content: " \25B2";
}
th[aria-sort="descending"]::after {
  content: " \25BC";
}
input.filter {
  font: inherit;
  font-size: 13px;
  padding: 3px 8px;
  margin: 2px 0 4px;
  width: 16em;
  border: 1px solid var(--line);
  border-radius: 4px;
}
td.name {
  min-width: 13em;
}
td.source {
  min-width: 10em;
}
td.ident code {
  white-space: nowrap;
}
h2 code, h3 code {
  font-size: 0.85em;
}
a {
  color: var(--accent);
  text-decoration: none;
}
a:hover {
  text-decoration: underline;
}
.headline {
  font-size: 17px;
  font-weight: 600;
  margin: 0 0 16px;
}
.cards {
  display: grid;
  grid-template-columns: repeat(auto-fill, minmax(240px, 1fr));
  gap: 10px;
  margin: 0 0 20px;
}
.card {
  border: 1px solid var(--line);
  border-radius: 8px;
  padding: 10px 12px;
}
.card .label {
  color: var(--muted);
  font-size: 12px;
  text-transform: uppercase;
  letter-spacing: 0.04em;
}
.card .value {
  font-size: 20px;
  font-weight: 650;
  font-variant-numeric: tabular-nums;
}
.card .detail {
  color: var(--muted);
  font-size: 12.5px;
}
.card.ok {
  background: var(--ok-bg);
  border-color: #a7f3d0;
}
.card.ok .value {
  color: var(--ok);
}
.card.warn {
  background: var(--warn-bg);
  border-color: #fcd34d;
}
.card.warn .value {
  color: var(--warn);
}
.card.unknown {
  background: var(--unk-bg);
}
.card.unknown .value {
  color: var(--unk);
}
figure {
  margin: 8px 0 20px;
}
figure.chart svg {
  display: block;
  width: 100%;
  height: auto;
}
.scroll {
  overflow-x: auto;
}
table {
  border-collapse: collapse;
  width: 100%;
  font-size: 13.5px;
  margin: 4px 0 8px;
}
th, td {
  padding: 5px 8px;
  border-bottom: 1px solid var(--line);
  text-align: left;
  vertical-align: top;
}
th {
  font-weight: 600;
  color: var(--muted);
  font-size: 12px;
  text-transform: uppercase;
  letter-spacing: 0.03em;
  border-bottom: 2px solid var(--line);
  vertical-align: bottom;
}
td.num, th.num {
  text-align: right;
  font-variant-numeric: tabular-nums;
}
td.num {
  white-space: nowrap;
}
tbody tr:nth-child(even) {
  background: #fafbfc;
}
tr.total td {
  font-weight: 600;
  border-top: 2px solid var(--line);
}
.overview td:first-child {
  white-space: nowrap;
}
.badge {
  display: inline-block;
  padding: 0 8px;
  border-radius: 10px;
  font-size: 12.5px;
  font-weight: 600;
}
.badge.ok {
  background: var(--ok-bg);
  color: var(--ok);
}
.badge.warn {
  background: var(--warn-bg);
  color: var(--warn);
}
.badge.unknown {
  background: var(--unk-bg);
  color: var(--unk);
}
.diagnostics {
  border-left: 3px solid #f59e0b;
  background: var(--warn-bg);
  padding: 8px 14px 8px 28px;
  margin: 8px 0 16px;
  font-size: 14px;
}
.empty {
  font-size: 16px;
  font-weight: 600;
}
details summary {
  cursor: pointer;
  font-weight: 600;
  margin: 20px 0 6px;
}
footer {
  margin-top: 48px;
  color: var(--muted);
  font-size: 12.5px;
  border-top: 1px solid var(--line);
  padding-top: 10px;
}
"""
