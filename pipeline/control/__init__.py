"""Pointer control from per-face results: filtering, mapping, calibration, clicks and the mouse.

Everything here depends only on pipeline.results.FaceResult, so it runs on recorded or live
results alike. Importing this package never touches a display: the pyautogui backend is imported
lazily, the first time a real pointer is needed (mouse.open_backend).
"""
