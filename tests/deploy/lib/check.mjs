// The deploy tests' one check harness: each check counts as passed or prints `FAIL what: why` on
// stderr, and the script ends with a summary line and exit status 1 when any check failed.
//
//   const t = checker();                 // { logPasses: true } prints `ok   what` for each pass
//   t.check(ok, "what", "why it failed"); // returns ok, for `if (!t.check(...)) ...`
//   t.fail("what", "why");               // a failure found without a check (returns false)
//   t.pass();                            // a check that passed without a message
//   t.exit(`${t.checks} checks passed, ${t.failures} failed`);
export function checker({ logPasses = false } = {}) {
  const t = {
    checks: 0,
    failures: 0,
    check(ok, what, why) {
      if (ok) {
        t.checks++;
        if (logPasses) console.log(`ok   ${what}`);
      } else {
        t.fail(what, why);
      }
      return ok;
    },
    fail(what, why) {
      t.failures++;
      console.error(`FAIL ${what}: ${why}`);
      return false;
    },
    pass() {
      t.checks++;
    },
    exit(summary) {
      console.log(summary);
      process.exit(t.failures ? 1 : 0);
    },
  };
  return t;
}
