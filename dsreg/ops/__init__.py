"""L6 operations that combine the layers: tags, checkout (plan, then apply), verify and gc."""
