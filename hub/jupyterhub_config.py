"""JupyterHub for a class on one machine: `sudo make hub` (hub/README.md has the steps).

Every person on the roster (hub/roster.csv) is a system user and logs in with PAM (their
Unix password) or through the LMS with LTI 1.3. A student's server opens on their home
folder with nbgrader's Assignments tab and no instructor tools; an instructor's opens on
the course folder with formgrader, and is a hub admin. nbgrader's exchange moves
releases, submissions and feedback between them; an idle culler stops servers nobody
uses (their files stay). The hub runs as root, because it starts each server as that
person's user.

Settings come from the environment, so `make hub`, the end-to-end test and the container
image share this file:

  LTFT_HUB_IP, LTFT_HUB_PORT     where the proxy listens (127.0.0.1, 8000). For a class,
                                 put a TLS-terminating reverse proxy in front, or listen
                                 on 0.0.0.0 behind a firewall with --JupyterHub.ssl_cert/key.
  LTFT_HUB_ROSTER                the roster CSV (hub/roster.csv)
  LTFT_HUB_AUTH                  pam (default) or lti13
  LTFT_HUB_STATE                 the hub's database and cookie secret (.jupyter-runtime/hub)
  LTFT_HUB_CULL_AFTER            seconds a server may sit idle before it is stopped (3600)
  LTFT_HUB_RECORD_TIMING         1: students' JupyterLab records when each cell ran, in the
                                 notebook (0, off, by default; hub/README.md, "Timing the
                                 exercises": tell the class before turning it on)
  LTFT_COURSE_DIR, LTFT_EXCHANGE, LTFT_INSTRUCTORS_GROUP
                                 as hub/roster.py made them (/srv/ltft/course,
                                 /srv/nbgrader/exchange, ltft-instructors)
  LTFT_LTI_ISSUER, LTFT_LTI_CLIENT_ID, LTFT_LTI_AUTHORIZE_URL, LTFT_LTI_JWKS_URL
                                 LTI 1.3 only: what the LMS shows when you register the
                                 tool (the tool's own settings are at /hub/lti13/config)
"""
import os
import sys
from pathlib import Path

HUB = Path(__file__).resolve().parent
sys.path.insert(0, str(HUB))
import roster as class_roster  # noqa: E402  (hub/roster.py)

c = get_config()  # noqa: F821 (provided by JupyterHub)

ENV = os.environ
ROSTER = class_roster.read_roster(ENV.get("LTFT_HUB_ROSTER", str(HUB / "roster.csv")))
RECORD_TIMING = class_roster.record_timing(ENV.get(class_roster.TIMING_SWITCH))
PLACE = class_roster.Place.from_env()
COURSE = class_roster.COURSE_ID
STATE = Path(ENV.get("LTFT_HUB_STATE", str(HUB.parent / ".jupyter-runtime" / "hub")))
STATE.mkdir(parents=True, exist_ok=True)
STATE.chmod(0o700)                      # the cookie secret lives here
VENV_BIN = Path(sys.executable).parent  # the hub runs from the course's .venv; so do the servers
for closed in class_roster.closed_folders(sys.executable):
    print(f"warning: other users cannot pass through {closed} to reach {os.path.realpath(sys.executable)}; "
          "servers will fail to start unless an ACL lets them (install the course's Python where all can read it)",
          file=sys.stderr)

# --- where it listens, what it keeps --------------------------------------------------
c.JupyterHub.bind_url = f"http://{ENV.get('LTFT_HUB_IP', '127.0.0.1')}:{int(ENV.get('LTFT_HUB_PORT', '8000'))}"
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.db_url = f"sqlite:///{STATE / 'jupyterhub.sqlite'}"
c.JupyterHub.cookie_secret_file = str(STATE / "jupyterhub_cookie_secret")
c.ConfigurableHTTPProxy.pid_file = str(STATE / "proxy.pid")
c.ConfigurableHTTPProxy.command = [str(HUB / "node_modules" / ".bin" / "configurable-http-proxy")]
c.JupyterHub.cleanup_servers = True     # stopping the hub stops every server it started

# --- who may log in ----------------------------------------------------------------
c.Authenticator.allowed_users = set(ROSTER.ids)
c.Authenticator.admin_users = set(ROSTER.instructors)
# nbgrader's group names, should you switch on its JupyterHubAuthPlugin for several courses.
c.JupyterHub.load_groups = {
    f"nbgrader-{COURSE}": {"users": ROSTER.students},
    f"formgrade-{COURSE}": {"users": ROSTER.instructors},
}

AUTH = ENV.get("LTFT_HUB_AUTH", "pam")
if AUTH == "pam":
    c.JupyterHub.authenticator_class = "pam"
elif AUTH == "lti13":
    missing = [k for k in ("LTFT_LTI_ISSUER", "LTFT_LTI_CLIENT_ID", "LTFT_LTI_AUTHORIZE_URL",
                           "LTFT_LTI_JWKS_URL") if not ENV.get(k)]
    if missing:
        raise ValueError(f"LTFT_HUB_AUTH=lti13 needs {', '.join(missing)} (from the LMS's tool registration).")
    c.JupyterHub.authenticator_class = class_roster.lti13_authenticator(ROSTER)
    c.LTI13Authenticator.issuer = ENV["LTFT_LTI_ISSUER"]
    c.LTI13Authenticator.client_id = set(ENV["LTFT_LTI_CLIENT_ID"].split(","))
    c.LTI13Authenticator.authorize_url = ENV["LTFT_LTI_AUTHORIZE_URL"]
    c.LTI13Authenticator.jwks_endpoint = ENV["LTFT_LTI_JWKS_URL"]
    c.LTI13Authenticator.username_key = "email"
else:
    raise ValueError(f"`LTFT_HUB_AUTH` must be one of pam, lti13, got {AUTH!r}.")

# --- each person's server ------------------------------------------------------------
c.JupyterHub.spawner_class = "localprocess"   # the person's own Unix user
c.Spawner.cmd = [str(VENV_BIN / "jupyterhub-singleuser")]
c.Spawner.default_url = "/lab"
c.Spawner.http_timeout = 120
c.Spawner.start_timeout = 120


def pre_spawn_hook(spawner):
    """Students: home folder, Assignments tab, no instructor tools. Instructors: the
    course folder with formgrader. Both: the course's Python first on PATH (terminals
    run its nbgrader and `python -m autograder`), and the exchange."""
    role = ROSTER.role(spawner.user.name)
    if role is None:
        raise ValueError(f"{spawner.user.name!r} is not on the roster")
    if role == "student":
        config_path = class_roster.student_config_path(HUB.parent, RECORD_TIMING)
    else:
        config_path = [str(HUB / "jupyter" / "common")]
        # The server starts in the home folder; nbgrader finds the course's config on this path.
        config_path.insert(0, str(PLACE.course_dir))
        spawner.notebook_dir = str(PLACE.course_dir)
    spawner.environment.update({
        "PATH": os.pathsep.join([str(VENV_BIN), "/usr/local/bin", "/usr/bin", "/bin"]),
        "JUPYTER_CONFIG_PATH": os.pathsep.join(config_path),
        "LTFT_EXCHANGE": str(PLACE.exchange),
        "LTFT_ROLE": role,
    })


c.Spawner.pre_spawn_hook = pre_spawn_hook

# --- the idle culler -------------------------------------------------------------------
CULL_AFTER = int(ENV.get("LTFT_HUB_CULL_AFTER", "3600"))
c.JupyterHub.services = [{
    "name": "idle-culler",
    "command": [sys.executable, "-m", "jupyterhub_idle_culler", f"--timeout={CULL_AFTER}",
                f"--cull-every={max(5, min(300, CULL_AFTER // 4))}"],
}]
c.JupyterHub.load_roles = [{
    "name": "idle-culler",
    "scopes": ["list:users", "read:users:activity", "read:servers", "delete:servers"],
    "services": ["idle-culler"],
}]
