"""edgegaze: an OpenVINO edge pipeline, face -> landmarks -> head pose -> gaze.

Reading order follows the product: zoo -> convert -> optimize -> stages -> runner -> report -> control.
"""

__version__ = "0.1.0"
