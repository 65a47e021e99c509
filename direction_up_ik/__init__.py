"""direction_up_ik: Direction-Up inverse kinematics for ROS 2.

The solver core (``direction_up_ik.core``) is re-exported here and never imports
ROS; the ROS 2 node lives in ``direction_up_ik.ros`` and the generated message
types in ``direction_up_ik.msg`` / ``direction_up_ik.srv``.
"""

# The rosidl-generated msg/srv modules are installed into a second
# ``direction_up_ik`` folder (the venv's site-packages) during development;
# merge it into this package's search path. In a colcon install both are one folder.
__path__ = __import__("pkgutil").extend_path(__path__, __name__)

from .core import *  # noqa: E402,F401,F403
from .core import __all__  # noqa: E402,F401
