"""Reference implementations the judges compute expected values with.

These run only where judging happens (the parent process of the standalone
grader, or the kernel under nbgrader); probes never import them.
"""
