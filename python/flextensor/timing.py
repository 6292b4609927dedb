"""Offload timing reports: the library's table, and its rows as numbers."""


class OffloadTimingReport:
    """What collect_offload_timing() returns: the table as the library wrote
    it (text), the number of passes, and per trap (rows, in pass order) the
    compute, transfer and wait statistics in milliseconds (transfer and wait
    None for a resident trap)."""

    def __init__(self, text):
        self.text = text
        self.passes = 0
        self.rows = []
        self.per_pass = {}
        self.total = {}
        lines = text.splitlines()
        if lines and lines[0].startswith("Offload Timing ("):
            head = lines[0][len("Offload Timing ("):]
            self.passes = int(head.split()[0]) if head.split()[0].isdigit() else 0
        for line in lines[2:]:
            cells = [c.strip() for c in line.split("|")]
            if len(cells) < 10:
                continue
            label = cells[0]

            def num(c):
                c = c.replace("\u2190", "").strip()
                return None if c in ("", "-") else float(c)

            if label in ("Avg/pass", "Sum (all)"):
                d = {"compute_ms": num(cells[1]), "transfer_ms": num(cells[6]),
                     "wait_ms": num(cells[8])}
                if label == "Avg/pass":
                    self.per_pass = d
                else:
                    self.total = d
                continue
            row = {
                "trap": label,
                "compute_ms": dict(zip(("mean", "median", "std", "min", "max"),
                                       map(num, cells[1:6]))),
                "transfer_ms": None if num(cells[6]) is None else
                {"mean": num(cells[6]), "median": num(cells[7])},
                "wait_ms": None if num(cells[8]) is None else
                {"mean": num(cells[8]), "median": num(cells[9])},
                "stall": "\u2190" in line,
            }
            self.rows.append(row)

    def __str__(self):
        return self.text

    def __repr__(self):
        return "<OffloadTimingReport %d passes, %d traps>" % (self.passes, len(self.rows))


def format_offload_timing_table(report):
    """The table of a report (the library's own text: Trap | Compute avg | med
    | +-std | min | max | Transfer avg | med | Wait avg | med (then Decode avg
    | med when the store is coded), a left arrow
    where the mean wait exceeds 0.01 ms, rows Avg/pass and Sum (all))."""
    if isinstance(report, OffloadTimingReport):
        return report.text.rstrip("\n")
    if isinstance(report, str):
        return report.rstrip("\n")
    raise TypeError("format_offload_timing_table() takes what collect_offload_timing() "
                    "returned, not %s" % type(report).__name__)
