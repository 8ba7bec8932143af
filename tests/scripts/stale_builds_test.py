"""scripts/stale-builds.py on a made-up build tree: what a run read stays, the rest goes.

Run by the lint step: python3 -m unittest discover -s tests/scripts -p '*_test.py'
"""

import contextlib
import importlib.util
import io
import os
import pathlib
import tempfile
import unittest

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "scripts" / "stale-builds.py"
spec = importlib.util.spec_from_file_location("stale_builds", SCRIPT)
stale_builds = importlib.util.module_from_spec(spec)
spec.loader.exec_module(stale_builds)

USED = "serde-00000000000000aa"
UNUSED = "serde-00000000000000bb"
UNUSED_SCRIPT = "ring-00000000000000cc"


def unit(profile, name, outputs):
    fp = profile / ".fingerprint" / name
    fp.mkdir(parents=True)
    (fp / f"lib-{name.rsplit('-', 1)[0]}").write_text("1234")
    (fp / "invoked.timestamp").write_text("")
    for output in outputs:
        path = profile / output
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x" * 100)


class StaleBuilds(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)
        self.old_cwd = os.getcwd()
        os.chdir(self.dir.name)
        self.addCleanup(os.chdir, self.old_cwd)
        pathlib.Path("build").mkdir()
        self.debug = pathlib.Path("target/debug")
        unit(self.debug, USED, ["deps/libserde-00000000000000aa.rlib", "deps/serde-00000000000000aa.d"])
        unit(self.debug, UNUSED, ["deps/libserde-00000000000000bb.rlib", "deps/libserde-00000000000000bb.rmeta",
                                  "deps/serde-00000000000000bb.d", "examples/demo-00000000000000bb"])
        unit(self.debug, UNUSED_SCRIPT, ["build/ring-00000000000000cc/build-script-build"])
        # A profile no step of the run built (its step was skipped).
        self.fuzz = pathlib.Path("build/fuzz-target/x86_64-unknown-linux-gnu/release")
        unit(self.fuzz, UNUSED, ["deps/libserde-00000000000000bb.rlib"])

    def run_script(self, *commands, reads=(), rebuilt_each_run=frozenset()):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            for command in commands:
                if command == "prune":
                    stale_builds.prune(rebuilt_each_run)
                else:
                    getattr(stale_builds, command)()
                if command == "mark":
                    for path in reads:
                        path.read_bytes()
        return out.getvalue()

    def test_a_run_keeps_what_it_read_and_deletes_the_rest(self):
        read = self.debug / ".fingerprint" / USED / "lib-serde"
        out = self.run_script("mark", "prune", reads=[read])
        if not stale_builds.access_times_kept():
            self.assertIn("access times are not kept", out)
            self.assertTrue((self.debug / "deps/libserde-00000000000000bb.rlib").exists())
            return
        self.assertTrue((self.debug / ".fingerprint" / USED).is_dir())
        self.assertTrue((self.debug / "deps/libserde-00000000000000aa.rlib").exists())
        self.assertTrue((self.debug / "deps/serde-00000000000000aa.d").exists())
        for gone in [".fingerprint/" + UNUSED, "deps/libserde-00000000000000bb.rlib",
                     "deps/libserde-00000000000000bb.rmeta", "deps/serde-00000000000000bb.d",
                     "examples/demo-00000000000000bb", ".fingerprint/" + UNUSED_SCRIPT,
                     "build/ring-00000000000000cc"]:
            self.assertFalse((self.debug / gone).exists(), gone)
        self.assertIn("1 units kept, 2 deleted", out)
        # The profile the run never read is kept whole.
        self.assertTrue((self.fuzz / "deps/libserde-00000000000000bb.rlib").exists())
        self.assertFalse(os.path.exists(stale_builds.MARK))

    def test_the_workspace_units_go_too_when_asked(self):
        unit(self.debug, "agentao-00000000000000dd", ["deps/libagentao-00000000000000dd.rlib",
                                                      "deps/permissions-00000000000000dd"])
        unit(self.fuzz, "agentao-00000000000000ee", ["deps/libagentao-00000000000000ee.rlib"])
        reads = [self.debug / ".fingerprint" / USED / "lib-serde",
                 self.debug / ".fingerprint/agentao-00000000000000dd/lib-agentao"]
        out = self.run_script("mark", "prune", reads=reads, rebuilt_each_run={"agentao"})
        if not stale_builds.access_times_kept():
            return
        self.assertTrue((self.debug / "deps/libserde-00000000000000aa.rlib").exists())
        self.assertFalse((self.debug / "deps/libagentao-00000000000000dd.rlib").exists())
        self.assertFalse((self.debug / "deps/permissions-00000000000000dd").exists())
        self.assertFalse((self.debug / ".fingerprint/agentao-00000000000000dd").exists())
        self.assertIn("1 units kept, 3 deleted", out)
        # A profile the run never read keeps even the workspace's units.
        self.assertTrue((self.fuzz / "deps/libagentao-00000000000000ee.rlib").exists())

    def test_without_a_mark_nothing_is_deleted(self):
        out = self.run_script("prune")
        self.assertIn("no mark", out)
        self.assertTrue((self.debug / "deps/libserde-00000000000000bb.rlib").exists())

    def test_a_run_that_read_nothing_of_a_profile_deletes_nothing_there(self):
        self.run_script("mark", "prune")
        self.assertTrue((self.debug / "deps/libserde-00000000000000aa.rlib").exists())
        self.assertTrue((self.debug / "deps/libserde-00000000000000bb.rlib").exists())


if __name__ == "__main__":
    unittest.main()
