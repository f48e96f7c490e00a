"""What a fan-out found: failures (the thing under test is wrong) and
infrastructure errors (a job was lost, died or ran the wrong number of
runs: the answer is incomplete). Exit 0 all passed, 1 failures, 2 any
infrastructure error (failures found meanwhile are still printed)."""

import sys

PASS, FAILURES, INFRASTRUCTURE = 0, 1, 2


class Outcome:
    def __init__(self):
        self.failures = []  # (sort key, text)
        self.errors = []  # text naming the job

    def fail(self, key, text):
        self.failures.append((key, text))

    def error(self, text):
        self.errors.append(text)
        print(f"INFRASTRUCTURE ERROR {text}", file=sys.stderr, flush=True)

    def exit_code(self):
        if self.errors:
            return INFRASTRUCTURE
        return FAILURES if self.failures else PASS

    def report(self, what):
        for _, text in sorted(self.failures):
            print(text)
        for text in self.errors:
            print(f"infrastructure error: {text}")
        code = self.exit_code()
        verdict = {PASS: "pass", FAILURES: "FAILURES", INFRASTRUCTURE: "INCOMPLETE (infrastructure errors)"}[code]
        print(f"{what}: {len(self.failures)} failing, {len(self.errors)} infrastructure error(s): {verdict}")
        return code
