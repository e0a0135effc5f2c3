"""What every single-user server on the hub knows about the course: its id and where
nbgrader's exchange is. The hub puts this folder on JUPYTER_CONFIG_PATH and passes
LTFT_EXCHANGE (hub/jupyterhub_config.py), so a student's Assignments tab and
`nbgrader fetch_assignment`, `submit` and `fetch_feedback` in a terminal use the same
exchange as the instructors' course folder."""
import os

c = get_config()  # noqa: F821 (provided by nbgrader)

c.CourseDirectory.course_id = "logit-to-first-token"
c.Exchange.root = os.environ.get("LTFT_EXCHANGE", "/srv/nbgrader/exchange")

# Submissions closed to other students (hub/ltft_exchange.py).
import sys  # noqa: E402
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
c.ExchangeFactory.submit = "ltft_exchange.PrivateSubmit"
c.ExchangeFactory.collect = "ltft_exchange.PrivateCollect"      # trusts no name, time or link a student wrote
