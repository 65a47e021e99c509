"""ROS 2 adapters of the core: the solver node, its parameter schema and conversions.

Importing this package's modules needs rclpy and the generated interfaces
(``direction_up_ik.msg`` / ``.srv``), except :mod:`.config` and :mod:`.joint_state`,
which are plain Python.
"""
