"""The session: TensorFlow's environment and the device, and the two backends (plain, monitored)."""
