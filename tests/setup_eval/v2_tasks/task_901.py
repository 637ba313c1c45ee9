"""Make ~/Desktop/notes.txt with two lines; partial credit per line (a V2-shaped task for the test desktop)."""

NOTES = "/home/user/Desktop/notes.txt"
LINES = ("hello v2", "done")


class Task901:
    id = "901"
    snapshot = "os"
    instruction = ("Create the text file ~/Desktop/notes.txt whose first line is 'hello v2' "
                   "and whose second line is 'done'.")
    config = []
    related_apps = ["os"]
    proxy = False

    def get(self, key, default=None):
        return getattr(self, key, default)

    def setup(self, setup_controller, use_proxy=False):
        setup_controller._execute_setup(["bash", "-c", f"mkdir -p ~/Desktop && rm -f {NOTES}"])

    def evaluate(self, env):
        from desktop_env.evaluators.getters import get_vm_file

        path = get_vm_file(env, {"path": NOTES, "dest": "notes.txt"})
        if path is None:
            return {"score": 0.0, "lines": None}
        with open(path) as f:
            found = f.read().splitlines()
        return {"score": sum(0.5 for line in LINES if line in found), "lines": found}


TASK_CLASS = Task901
