"""Budget results as JUnit XML, the test report format CI systems display.

One ``<testcase>`` per (budget, host, allocator): a breach is a ``<failure>``
with the one-line result as its message and the contributors in its text; a
budget that could not be judged is ``<skipped>``; a capture that could not be
read is one ``<error>`` case, so the CI page says why the gate failed.

Text from the capture (op names, host names) goes through ElementTree, which
escapes markup; characters XML 1.0 cannot hold at all (most control
characters) are replaced first, so the file always parses.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Sequence

from traceparse.gate.budgets import Result

__all__ = ["junit_xml", "xml_safe"]

# Characters outside XML 1.0's Char production.
_NOT_XML = re.compile("[^\u0009\u000a\u000d\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def xml_safe(text: object) -> str:
    """``str(text)`` with every character XML 1.0 forbids replaced by U+FFFD."""
    return _NOT_XML.sub("\ufffd", str(text))


def _case_class(result: Result) -> str:
    # JUnit readers split classnames on dots; keep the host's own dots out.
    host = result.host.replace(".", "_")
    allocator = result.allocator.replace(".", "_")
    return f"traceparse.{host}.{allocator}"


def junit_xml(
    results: Sequence[Result],
    *,
    suite: str = "traceparse check",
    source: str | None = None,
    error: str | None = None,
) -> str:
    """The JUnit XML document (a ``<testsuites>`` with one ``<testsuite>``) as text.

    ``error`` adds one errored case (the capture could not be read or checked).
    """
    failures = sum(r.status == "fail" for r in results)
    skipped = sum(r.status == "skip" for r in results)
    errors = 1 if error is not None else 0
    tests = len(results) + errors
    counts = {
        "tests": str(tests),
        "failures": str(failures),
        "errors": str(errors),
        "skipped": str(skipped),
        "time": "0",
    }
    root = ET.Element("testsuites", {"name": xml_safe(suite), **counts})
    suite_element = ET.SubElement(root, "testsuite", {"name": xml_safe(suite), **counts})
    if source is not None:
        properties = ET.SubElement(suite_element, "properties")
        ET.SubElement(properties, "property", {"name": "source", "value": xml_safe(source)})
    for result in results:
        case = ET.SubElement(
            suite_element,
            "testcase",
            {
                "classname": xml_safe(_case_class(result)),
                "name": xml_safe(f"{result.budget} ({result.where})"),
                "time": "0",
            },
        )
        if result.status == "fail":
            failure = ET.SubElement(
                case,
                "failure",
                {
                    "message": xml_safe(result.line()),
                    # Issue 39: a run that died of out-of-memory is not a breached budget.
                    "type": "OutOfMemory" if result.budget == "out_of_memory" else "BudgetExceeded",
                },
            )
            failure.text = xml_safe(_details(result))
        elif result.status == "skip":
            ET.SubElement(case, "skipped", {"message": xml_safe(result.message)})
        out = ET.SubElement(case, "system-out")
        out.text = xml_safe(result.line())
    if error is not None:
        case = ET.SubElement(
            suite_element,
            "testcase",
            {"classname": "traceparse", "name": "read capture", "time": "0"},
        )
        failure = ET.SubElement(
            case, "error", {"message": xml_safe(error), "type": "TraceparseError"}
        )
        failure.text = xml_safe(error)
    ET.indent(root)
    body = ET.tostring(root, encoding="unicode")
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + body + "\n"


def _details(result: Result) -> str:
    lines = [f"{result.budget}: {result.where}", result.message]
    if result.contributors:
        lines.append("top contributors:")
        lines.extend(f"  {c}" for c in result.contributors)
    return "\n".join(lines)
