from .layout import Layout, LayoutError
